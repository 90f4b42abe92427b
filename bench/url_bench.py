"""URL parsers measured for link resolution: correctness on the WHATWG (WPT) http(s) cases
and time per link (decision 0040).

(a) ada-url's ``join_url`` (WHATWG in C++), as ``crawlfleet.urls.join`` calls it;
(b) ``urllib.parse.urljoin``, what links were resolved with before;
(c) (b) then w3lib's ``safe_url_string``, what Scrapy sends for a link.
A case agrees when the href is the expected one, or when a case that must fail does
(no URL, or an exception). Time: the best of ``--repeat`` passes over a mix of hrefs found
on documentation pages, per link.

    .venv/bin/python bench/url_bench.py
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urljoin

from ada_url import join_url, normalize_url
from w3lib.url import safe_url_string

from crawlfleet.parsing.links import origin_of, resolve
from crawlfleet.settings import DEFAULT_STRIP_PARAMS
from crawlfleet.urls import UrlRules, join

TABLE = Path(__file__).parent.parent / "tests" / "data" / "whatwg_url_http_cases.json"
BASE = "https://docs.example.org/3/library/stdtypes.html"
HREFS = [
    "functions.html#abs", "../reference/datamodel.html#object.__len__", "#truth-value-testing",
    "/3/genindex.html", "https://docs.example.org/3/library/string.html", "index.html",
    "https://www.example.com/", "?highlight=str", "../_sources/library/stdtypes.rst.txt",
    "/3/search.html?q=caf%C3%A9&area=default", "https://bugs.example.org/issue?id=4711&x=1",
    "../../whatsnew/3.12.html#what-s-new",
]  # fmt: skip


def ada(base: str | None, href: str) -> str | None:
    try:
        return join_url(base, href) if base is not None else normalize_url(href)
    except ValueError:
        return None


def stdlib(base: str | None, href: str) -> str | None:
    try:
        return urljoin(base or "", href)
    except ValueError:
        return None


def w3lib(base: str | None, href: str) -> str | None:
    try:
        return safe_url_string(urljoin(base or "", href))
    except ValueError:
        return None


def agreement(resolver: Callable[[str | None, str], str | None]) -> tuple[int, int]:
    cases = json.loads(TABLE.read_text())["cases"]
    agree = 0
    for case in cases:
        got = resolver(case["base"], case["input"])
        if case.get("fails"):
            agree += got is None
        else:
            agree += got == case["href"]
    return agree, len(cases)


def per_link_us(
    step: Callable[[str], object], repeat: int, rounds: int = 2000, hrefs: list[str] = HREFS
) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        for _ in range(rounds):
            for href in hrefs:
                step(href)
        best = min(best, time.perf_counter() - started)
    return best / (rounds * len(hrefs)) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    for name, resolver in (("ada-url join_url", ada), ("urllib urljoin", stdlib),
                           ("urljoin + w3lib safe_url_string", w3lib)):  # fmt: skip
        agree, total = agreement(resolver)
        us = per_link_us(lambda href, r=resolver: r(BASE, href), args.repeat)
        print(f"{name:34} WPT http(s) {agree}/{total} agree   {us:.2f} µs a link")
    origin = origin_of(BASE)

    def crawlfleet(href: str) -> object:
        url = resolve(BASE, href, origin)
        return UrlRules(DEFAULT_STRIP_PARAMS).full_target(url) if url else None

    rules = UrlRules(DEFAULT_STRIP_PARAMS)

    def cached(href: str) -> object:
        url = resolve(BASE, href, origin)
        return rules.target(url) if url else None

    plain = ["/3/genindex.html", "/3/library/string.html", "https://www.example.com/"]
    fast = per_link_us(lambda href: resolve(BASE, href, origin), args.repeat, hrefs=plain)
    whatwg = per_link_us(lambda href: join(BASE, href), args.repeat, hrefs=plain)
    print(f"{'plain hrefs: our fast path':34} {fast:.2f} µs a link; urls.join {whatwg:.2f}")
    print(f"{'resolve + target, uncached':34} {per_link_us(crawlfleet, args.repeat):.2f} µs a link")
    print(f"{'resolve + target, cached':34} {per_link_us(cached, args.repeat):.2f} µs a link")


if __name__ == "__main__":
    main()
