"""The corpus benchmark's ground truth (bench/corpus_truth.py): its URL resolver and its reading
of a small site on disk. The bench is no test; a wrong truth would make every figure lie."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest


def _load() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "bench" / "corpus_truth.py"
    spec = importlib.util.spec_from_file_location("corpus_truth", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["corpus_truth"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


truth = _load()
BASE = truth.parse_absolute("http://a/b/c/d;p?q")

# RFC 3986 section 5.4 (normal and abnormal examples, fragments stripped), then the WHATWG
# URL standard's clean-up of the input, as browsers read hrefs.
CASES = [
    ("g", "http://a/b/c/g"),
    ("./g", "http://a/b/c/g"),
    ("g/", "http://a/b/c/g/"),
    ("/g", "http://a/g"),
    ("//g", "http://g/"),
    ("?y", "http://a/b/c/d;p?y"),
    ("g?y", "http://a/b/c/g?y"),
    ("#s", "http://a/b/c/d;p?q"),
    ("g#s", "http://a/b/c/g"),
    ("g?y#s", "http://a/b/c/g?y"),
    (";x", "http://a/b/c/;x"),
    ("", "http://a/b/c/d;p?q"),
    (".", "http://a/b/c/"),
    ("./", "http://a/b/c/"),
    ("..", "http://a/b/"),
    ("../g", "http://a/b/g"),
    ("../..", "http://a/"),
    ("../../g", "http://a/g"),
    ("../../../g", "http://a/g"),
    ("/./g", "http://a/g"),
    ("g.", "http://a/b/c/g."),
    ("..g", "http://a/b/c/..g"),
    ("./g/.", "http://a/b/c/g/"),
    ("g;x=1/../y", "http://a/b/c/y"),
    ("g?y/../x", "http://a/b/c/g?y/../x"),
    ("http:g", "http://a/b/c/g"),  # WHATWG: same special scheme, no slash: relative
    ("  g\n", "http://a/b/c/g"),
    ("g\th", "http://a/b/c/gh"),
    ("\\g\\h?x\\y", "http://a/g/h?x\\y"),
    ("%2e%2E/g", "http://a/b/g"),
    ("HTTP://A:80/x", "http://a/x"),
    ("https://a:443/x", "https://a/x"),
    ("http://u@a:8080/x", "http://a:8080/x"),
    ("é ü", "http://a/b/c/%C3%A9%20%C3%BC"),
    ("mailto:x@a", None),
    ("javascript:void(0)", None),
]


@pytest.mark.parametrize(("href", "expected"), CASES)
def test_resolves_as_rfc_3986_and_whatwg_say(href: str, expected: str | None) -> None:
    url = truth.resolve(BASE, href)
    got = None if url is None else f"{url.scheme}://{url.authority}{url.target}"
    assert got == expected


def test_request_keys_merge_escapes_of_unreserved_characters_only() -> None:
    assert truth.request_key("/%7efoo%41") == truth.request_key("/~fooA") == "/~fooA"
    assert truth.request_key("/a%2fb") == "/a%2Fb" != truth.request_key("/a/b")
    assert truth.request_key("/a b?q=é") == "/a%20b?q=%C3%A9"


def test_site_on_disk_gives_required_optional_and_disallowed_urls(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "empty").mkdir()
    (tmp_path / "private").mkdir()
    (tmp_path / "index.html").write_text(
        '<base href="/"><a href="sub">dir</a> <a href="missing.html">404</a> '
        '<a href="notes.txt">text</a> <a href="gone.png">image</a> <a href="empty/">403</a> '
        '<a rel="nofollow" href="hidden.html">nf</a> <area href="private/x.html"> '
        '<a href="http://elsewhere/">off</a> <a href="p.html?x=1#top">query</a>'
    )
    (tmp_path / "sub" / "index.html").write_text('<a href="../index.html">up</a>')
    (tmp_path / "notes.txt").write_text("<a href='never.html'>not HTML</a>")
    (tmp_path / "hidden.html").write_text('<a href="behind.html">x</a>')
    (tmp_path / "behind.html").write_text("x")
    (tmp_path / "p.html").write_text('<meta name="robots" content="NoFollow"><a href="q.html">')
    (tmp_path / "q.html").write_text("x")
    (tmp_path / "private" / "x.html").write_text("x")
    robots = truth.Robots(("/private/",))

    found = truth.compute(tmp_path, "/", robots, "127.0.0.9:8000")

    assert found.required == {
        "/": 200,
        "/sub": 301,
        "/sub/": 200,
        "/index.html": 200,
        "/missing.html": 404,
        "/empty/": 403,
        "/p.html?x=1": 200,
    }
    assert found.optional == {
        "/notes.txt": 200,
        "/gone.png": 404,
        "/hidden.html": 200,
        "/q.html": 200,
    }
    assert found.disallowed_linked == {"/private/x.html"}
    # Links are counted per page URL: index.html is read at "/" and at "/index.html".
    assert (found.nofollow_links, found.nofollow_pages, found.offsite_links) == (2, 1, 2)
    assert robots.forbids("/private/")
    assert not robots.forbids("/privat")
