"""Check one crawl against the site manifest, from nginx's access log and the items file."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nginx_server import LogLine

ROBOTS = "/robots.txt"


@dataclass(frozen=True)
class Verdict:
    """What a crawl fetched compared with what it should have.

    ``duplicates`` counts the extra fetches of expected paths (a page fetched 3 times adds 2);
    ``missed`` the expected paths never fetched; ``unexpected`` fetches of paths the manifest
    does not list; ``robots_hosts`` how many hosts had robots.txt fetched.
    """

    responses: int
    expected: int
    fetched_expected: int
    duplicates: int
    missed: int
    disallowed_fetched: int
    unexpected: int
    robots_hosts: int
    hosts: int
    items: int
    unique_products: int
    products_expected: int
    examples: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return (
            self.duplicates == 0
            and self.missed == 0
            and self.disallowed_fetched == 0
            and self.unexpected == 0
            and self.robots_hosts == self.hosts
            and self.unique_products == self.products_expected
        )

    def summary(self) -> str:
        return (
            f"{self.fetched_expected}/{self.expected} expected paths fetched, "
            f"{self.duplicates} duplicate fetches, {self.missed} missed, "
            f"{self.disallowed_fetched} disallowed fetched, {self.unexpected} unexpected, "
            f"robots.txt on {self.robots_hosts}/{self.hosts} hosts, "
            f"{self.unique_products}/{self.products_expected} products in {self.items} items"
        )


def verify(manifest: dict[str, Any], log: list[LogLine], items_file: Path) -> Verdict:
    counts = Counter((line.host, line.uri) for line in log)
    expected: set[tuple[str, str]] = set()
    disallowed: set[tuple[str, str]] = set()
    for host, paths in manifest["hosts"].items():
        for kind in ("ok", "redirect", "missing"):
            expected.update((host, p) for p in paths[kind])
        disallowed.update((host, p) for p in paths["disallowed"])
    robots = {(host, ROBOTS) for host in manifest["hosts"]}
    dups = sorted(key for key in expected if counts[key] > 1)
    examples = [f"dup x{counts[h, p]} {h}{p}" for h, p in dups[:3]]
    missed = [key for key in expected if counts[key] == 0]
    examples += [f"missed {h}{p}" for h, p in sorted(missed)[:3]]
    bad = [key for key in counts if key in disallowed]
    examples += [f"disallowed {h}{p}" for h, p in sorted(bad)[:3]]
    known = expected | disallowed | robots
    unexpected = [key for key in counts if key not in known]
    examples += [f"unexpected {h}{p}" for h, p in sorted(unexpected)[:3]]
    items, products = read_items(items_file)
    return Verdict(
        responses=len(log),
        expected=len(expected),
        fetched_expected=len(expected) - len(missed),
        duplicates=sum(counts[key] - 1 for key in dups),
        missed=len(missed),
        disallowed_fetched=sum(counts[key] for key in bad),
        unexpected=sum(counts[key] for key in unexpected),
        robots_hosts=sum(1 for key in robots if counts[key] > 0),
        hosts=len(robots),
        items=items,
        unique_products=len(products),
        products_expected=sum(h["products"] for h in manifest["hosts"].values()),
        examples=tuple(examples),
    )


def read_items(path: Path) -> tuple[int, set[str]]:
    """How many item lines a JSONL file holds, and the distinct product ids among them."""
    if not path.exists():
        return 0, set()
    lines = 0
    products: set[str] = set()
    with path.open(encoding="utf-8") as file:
        for raw in file:
            if not raw.strip():
                continue
            lines += 1
            record = json.loads(raw)
            product = record.get("id")  # crawlfleet items carry a type; Scrapy's do not
            if product is not None and record.get("type", "product") == "product":
                products.add(str(product))
    return lines, products
