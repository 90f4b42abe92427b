"""The WHATWG URL Standard's http(s) cases (WPT ``urltestdata.json``, ported as a table in
``tests/data/whatwg_url_http_cases.json``) against ``urls.join`` and ``UrlRules.target``.

A case with a base is a link on a page of that base (``join``); a case without one is a URL
given alone (a seed: ``target``). Where a case has a URL, the request URL ``target`` makes of
it has the expected host, port, path and query (userinfo and fragment are never sent).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from crawlfleet.errors import BadUrl
from crawlfleet.urls import UrlRules, join

TABLE = json.loads(
    (Path(__file__).parent.parent / "data" / "whatwg_url_http_cases.json").read_text()
)
CASES: list[dict[str, Any]] = TABLE["cases"]
RULES = UrlRules(())

DIFFER_BY_DESIGN = {
    # ada-url 4.0.0 takes a label starting "xn--" as it is, without decoding its punycode;
    # the standard refuses a label that does not decode. Such a host is requested as written
    # and no resolver finds it: the URL fails at the fetch instead of at the parse.
    "wpt-urltestdata-307": "punycode not validated",
    "wpt-urltestdata-308": "punycode not validated",
    "wpt-urltestdata-310": "punycode not validated",
    "wpt-urltestdata-311": "punycode not validated",
    "wpt-urltestdata-312": "punycode not validated",
    "wpt-urltestdata-313": "punycode not validated",
    "wpt-urltestdata-901": "punycode not validated",
}


def _parsed(case: dict[str, Any]) -> str | None:
    """The URL crawlfleet makes of a case, None when it makes none."""
    if case["base"] is not None:
        return join(case["base"], case["input"])
    try:
        return RULES.target(case["input"]).url
    except BadUrl:
        return None


def _sent(href: str) -> str:
    """``href`` without userinfo and fragment: what a request URL keeps."""
    scheme, _, rest = href.partition("#")[0].partition("://")
    authority, slash, path_query = rest.partition("/")
    return f"{scheme}://{authority.rpartition('@')[2]}{slash}{path_query}"


def test_the_table_holds_every_selected_case() -> None:
    assert len(CASES) == 432
    assert sum(1 for case in CASES if case.get("fails")) == 203


@pytest.mark.parametrize("case", CASES, ids=[case["case"] for case in CASES])
def test_a_url_is_parsed_as_the_standard_says(case: dict[str, Any]) -> None:
    if case["case"] in DIFFER_BY_DESIGN:
        pytest.skip(DIFFER_BY_DESIGN[case["case"]])
    got = _parsed(case)
    if case.get("fails"):
        assert got is None
        return
    expected = case["href"] if case["base"] is not None else _sent(case["href"])
    assert got == expected
    url = RULES.target(got).url
    assert url == _sent(case["href"])
    rest = url.partition("://")[2]
    authority, slash, path_query = rest.partition("/")
    path, question_mark, query = (slash + path_query).partition("?")
    host, _, port = (
        authority.rpartition(":") if not authority.endswith("]") else (authority, "", "")
    )
    if not port.isdigit():
        host, port = authority, ""
    assert (host, port, path) == (case["hostname"], case["port"], case["path"])
    assert (question_mark + query if query else "") == case["query"]


@pytest.mark.parametrize("case", sorted(DIFFER_BY_DESIGN))
def test_the_cases_that_differ_still_differ(case: str) -> None:
    """When ada-url validates punycode, these cases agree: move them back to the table."""
    (row,) = [c for c in CASES if c["case"] == case]
    assert _parsed(row) is not None
