"""w3lib's URL expectations for http(s) (``canonicalize_url``: a dedup key; ``safe_url_string``:
what is sent), ported as a table in ``tests/data/w3lib_url_cases.json``.

Each row holds w3lib's answer and ours; where they differ the row says why (decision 0040).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from crawlfleet.errors import BadUrl
from crawlfleet.urls import UrlRules

TABLE = json.loads((Path(__file__).parent.parent / "data" / "w3lib_url_cases.json").read_text())
CASES: list[dict[str, Any]] = TABLE["cases"]
RULES = UrlRules(())


def _ours(case: dict[str, Any]) -> str | None:
    try:
        target = RULES.target(case["input"])
    except BadUrl:
        return None
    return target.key if case["checks"] == "dedup key" else target.url


@pytest.mark.parametrize("case", CASES, ids=[case["case"] for case in CASES])
def test_a_url_gives_the_tables_answer(case: dict[str, Any]) -> None:
    assert _ours(case) == case["ours"]
    assert (case["ours"] == case["w3lib"]) == ("why" not in case)


def test_the_counts_of_the_decision_record() -> None:
    """docs/decisions/0040 quotes these counts."""
    counts: dict[str, list[int]] = {}
    for case in CASES:
        agree_differ = counts.setdefault(case["checks"], [0, 0])
        agree_differ["why" in case] += 1
    assert counts == {"dedup key": [50, 11], "request URL": [20, 11]}
