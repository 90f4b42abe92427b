"""How fast a sitemap body is read, and how much of a broken one is kept (decision 0042).

Usage:
    .venv/bin/python bench/sitemap_read.py [--urls 50000] [--runs 5]

Readers: ours (``SitemapReader``: a tolerant tokenizer with a one-match path for the common
entry), the stdlib expat parser the project used before (stops at the first fault), and lxml's
recovering pull parser (``XMLPullParser(recover=True, resolve_entities=False,
no_network=True)``; left out when lxml is not installed). Bodies: a clean urlset of ``--urls``
entries with ``<lastmod>``, the same with an unescaped ``&`` in entry 50 and a broken tag in
entry 60 % of the way. Printed: best of ``--runs`` in ms and the URLs each reader kept.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import time
from collections.abc import Callable
from xml.parsers import expat

from crawlfleet.frontier.sitemap_format import SitemapReader, inflate

NS = "http://www.sitemaps.org/schemas/sitemap/0.9"


def body(urls: int, *, broken: bool) -> bytes:
    entries = [
        f"<url><loc>https://shop.example/item/{i}</loc><lastmod>2024-01-01</lastmod></url>"
        for i in range(urls)
    ]
    if broken:
        entries[50] = entries[50].replace("/item/50", "/item/50?a=1&b=2")
        cut = urls * 6 // 10
        entries[cut] = entries[cut].replace("</loc>", "</lo")
    xml = f'<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="{NS}">'
    return (xml + "".join(entries) + "</urlset>").encode()


def ours(data: bytes) -> int:
    reader = SitemapReader()
    count = 0
    for chunk in itertools.chain(inflate(data, len(data) + 1), [None]):
        reader.feed(chunk)
        count += len(reader.take_pages())
    return count


def stdlib_expat(data: bytes) -> int:
    found: list[str] = []
    parts: list[str] = []
    inside = [False]

    def start(name: str, attrs: object) -> None:
        inside[0] = name.endswith(" loc")
        parts.clear()

    def end(name: str) -> None:
        if inside[0]:
            found.append("".join(parts))
        inside[0] = False

    parser = expat.ParserCreate(namespace_separator=" ")
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = parts.append
    try:
        parser.Parse(data, True)
    except expat.ExpatError:
        return 0  # the old reader dropped the chunk's URLs with the fault
    return len(found)


def lxml_recover(data: bytes) -> int:
    etree = importlib.import_module("lxml.etree")
    parser = etree.XMLPullParser(
        events=("end",), recover=True, resolve_entities=False, no_network=True
    )
    count = 0
    for start in range(0, len(data), 256 * 1024):
        parser.feed(data[start : start + 256 * 1024])
        for _, element in parser.read_events():
            if element.tag == f"{{{NS}}}loc":
                count += 1
            elif element.tag == f"{{{NS}}}url":
                element.clear()
    parser.close()
    return count


def main() -> None:
    cli = argparse.ArgumentParser()
    cli.add_argument("--urls", type=int, default=50_000)
    cli.add_argument("--runs", type=int, default=5)
    args = cli.parse_args()
    readers: dict[str, Callable[[bytes], int]] = {"ours": ours, "stdlib expat": stdlib_expat}
    try:
        importlib.import_module("lxml.etree")
        readers["lxml recover"] = lxml_recover
    except ImportError:
        print("lxml not installed: left out")
    clean, broken = body(args.urls, broken=False), body(args.urls, broken=True)
    print(f"{args.urls} URLs, {len(clean) / 1e6:.1f} MB")
    print(f"| {'reader':<14} | clean ms | URLs kept | broken ms | URLs kept |")
    print(f"|{'-' * 16}|----------|-----------|-----------|-----------|")
    for name, read in readers.items():
        cells = []
        for data in (clean, broken):
            best_s = float("inf")
            for _ in range(args.runs):
                start = time.perf_counter()
                kept = read(data)
                best_s = min(best_s, time.perf_counter() - start)
            cells.append(f"{best_s * 1e3:>8.0f} | {kept:>9}")
        print(f"| {name:<14} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
