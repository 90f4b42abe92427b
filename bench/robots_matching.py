"""robots.txt: our reader (frontier/robots_txt.py) against protego 0.7.0, for truth and speed.

1. Google's expectations (``tests/unit/robots_google_cases.py``, 160 cases): how many each
   reader answers as Google does, ours counting the differences we chose (``DIFFERS``).
   protego is read the way ``RobotsCache`` used it before decision 0039: the body decoded
   as UTF-8 with replacement, ``Protego.parse`` and ``can_fetch(url, token)``.
2. Microseconds per check on a large, realistic file (``REALISTIC``: 40 groups of named bots
   with ``Disallow: /``, a ``*`` group of 120 rules, a third with wildcards, and 2,000 URLs,
   a third of them refused): ours is the request target (``fetchers.target``, as wired) plus
   ``RobotsRules.allowed``; protego is ``can_fetch``. Best of ``--rounds``.

    .venv/bin/python bench/robots_matching.py [--rounds 5]

Needs protego (``pip install 'crawlfleet[bench]'``).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

from protego import Protego

from crawlfleet.fetchers.target import target_of
from crawlfleet.frontier.robots_txt import parse_robots, path_and_query

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.unit.robots_google_cases import CASES, DIFFERS

BOTS = [f"BadBot{n}" for n in range(40)]
SECTIONS = ["wiki", "docs", "api", "search", "user", "shop", "cart", "tag", "print", "feeds"]


def realistic_robots() -> bytes:
    """A large site's robots.txt: bot blocks, then the ``*`` group of ~120 rules."""
    lines = [f"User-agent: {bot}\nDisallow: /\n" for bot in BOTS]
    lines.append("User-agent: *\nCrawl-delay: 1\n")
    for section in SECTIONS:
        lines.append(f"Allow: /{section}/$\n")
        for n in range(7):
            lines.append(f"Disallow: /{section}/private{n}/\n")
        lines.append(f"Disallow: /{section}/*?action=\n")
        lines.append(f"Disallow: /{section}/*.json$\n")
        lines.append(f"Allow: /{section}/public/\n")
        lines.append(f"Disallow: /{section}/*/edit\n")
    lines.append(
        "Disallow: /*?sessionid=\nDisallow: /*&sort=\nSitemap: https://example.com/sm.xml\n"
    )
    return "".join(lines).encode()


def sample_urls(count: int) -> list[str]:
    rng = random.Random(39)
    urls = []
    for n in range(count):
        section = rng.choice(SECTIONS)
        tail = rng.choice(
            [
                f"page{n}.html",
                f"private{n % 9}/x{n}",
                f"item/{n}?action=edit",
                f"data{n}.json",
                f"public/{n}",
                f"a/b/{n}/edit",
                f"list?page={n}&sort=asc",
                f"article-{n}",
            ]
        )
        urls.append(f"https://example.com/{section}/{tail}")
    return urls


def conformance() -> None:
    ours = sum(
        parse_robots(c.body, c.agent).allowed(path_and_query(c.url))
        is (c.allowed if c.name not in DIFFERS else not c.allowed)
        for c in CASES
    )
    print(f"Google's cases: {len(CASES)}")
    print(
        f"  ours:    {ours} as expected ({len(CASES) - len(DIFFERS)} as Google, {len(DIFFERS)} differ by design)"
    )
    agree = 0
    failed: list[str] = []
    for c in CASES:
        token = c.agent.strip().split("/", 1)[0].split(None, 1)
        rules = Protego.parse(c.body.decode("utf-8", errors="replace"))
        answer = rules.can_fetch(c.url, token[0].lower() if token else "")
        if answer is c.allowed:
            agree += 1
        else:
            failed.append(c.name)
    print(f"  protego: {agree} as Google, {len(failed)} otherwise: {', '.join(failed)}")


def speed(rounds: int) -> None:
    body = realistic_robots()
    urls = sample_urls(2000)
    ours = parse_robots(body, "crawlfleet")
    theirs = Protego.parse(body.decode())
    refused = sum(not ours.allowed(target_of(u).path_qs) for u in urls)
    agree = sum(
        ours.allowed(target_of(u).path_qs) is theirs.can_fetch(u, "crawlfleet") for u in urls
    )
    lines = body.count(b"\n")
    print(
        f"realistic file: {len(body):,} bytes, {lines:,} lines; {len(urls)} URLs, "
        f"{refused} refused; the two agree on {agree}"
    )
    for name, check in (
        ("ours (target_of + allowed)", lambda u: ours.allowed(target_of(u).path_qs)),
        ("protego can_fetch", lambda u: theirs.can_fetch(u, "crawlfleet")),
    ):
        best = min(_timed(check, urls) for _ in range(rounds))
        print(f"  {name:28} {best * 1e6 / len(urls):6.2f} µs per check")
    for name, parse in (
        ("ours parse_robots", lambda: parse_robots(body, "crawlfleet")),
        ("protego parse", lambda: Protego.parse(body.decode()).can_fetch("/", "crawlfleet")),
    ):
        best = min(_timed(lambda _, read=parse: read(), range(20)) for _ in range(rounds))
        print(f"  {name:28} {best * 1e3 / 20:6.2f} ms per file")


def _timed(check: object, items: object) -> float:
    started = time.perf_counter()
    for item in items:  # type: ignore[attr-defined]
        check(item)  # type: ignore[operator]
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    conformance()
    speed(args.rounds)


if __name__ == "__main__":
    main()
