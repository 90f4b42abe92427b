"""Drift test figures: false alarms on a steady site and detection delay after a redesign.

Runs ``frontier.drift.DriftTest`` over simulated page sequences (each page mismatches with
some share, independently, seeded):

- steady: ``--pages`` pages at an odd-page share ``q`` (a product without a price, a page
  half loaded); a firing is a false alarm. Reported: the share of runs with a false alarm
  within ``--pages`` pages.
- break: ``--before`` pages at a 2 % odd share, then every page (full redesign) or half the
  pages (one template of two) mismatch; reported: pages after the break until it fires
  (mean, 95th percentile, max).

    .venv/bin/python bench/drift_bench.py --runs 2000
"""

from __future__ import annotations

import argparse
import random
import statistics
from pathlib import Path

from results import write_section

from crawlfleet.frontier.drift import DriftTest

THRESHOLDS = (8.0, 10.0, 12.0, 15.0, 20.0)
STEADY_SHARES = (0.0, 0.02, 0.05, 0.10)
BREAK_SHARES = (1.0, 0.5)


def false_alarm(threshold: float, share: float, pages: int, rng: random.Random) -> bool:
    test = DriftTest(threshold=threshold)
    return any(test.observe(rng.random() < share) for _ in range(pages))


def delay(threshold: float, after: float, before: int, rng: random.Random) -> int | None:
    """Pages after the break until the test fires (None: fired before it, or never in 1000)."""
    test = DriftTest(threshold=threshold)
    for _ in range(before):
        if test.observe(rng.random() < 0.02):
            return None
    for page in range(1, 1001):
        if test.observe(rng.random() < after):
            return page
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--pages", type=int, default=10_000)
    parser.add_argument("--before", type=int, default=50)
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    args = parser.parse_args()
    rng = random.Random(51)
    head = "| threshold | " + " | ".join(f"false alarm q={q:.0%}" for q in STEADY_SHARES)
    head += " | " + " | ".join(f"delay at {s:.0%} (mean/p95/max)" for s in BREAK_SHARES) + " |"
    lines = [head, "|" + " --- |" * (2 + len(STEADY_SHARES) + len(BREAK_SHARES) - 1)]
    for threshold in THRESHOLDS:
        cells = []
        for share in STEADY_SHARES:
            alarms = sum(false_alarm(threshold, share, args.pages, rng) for _ in range(args.runs))
            cells.append(f"{alarms / args.runs:.2%}")
        for share in BREAK_SHARES:
            found = [delay(threshold, share, args.before, rng) for _ in range(args.runs)]
            delays = sorted(d for d in found if d is not None)
            p95 = delays[int(0.95 * (len(delays) - 1))]
            cells.append(f"{statistics.mean(delays):.1f} / {p95} / {delays[-1]}")
        lines.append(f"| {threshold:g} | " + " | ".join(cells) + " |")
    table = "\n".join(lines)
    print(f"{args.runs} runs; steady runs of {args.pages} pages; break after {args.before}")
    print(table)
    if args.write:
        body = (
            f"## Drift test (bench/drift_bench.py --runs {args.runs})\n\n"
            f"Steady runs of {args.pages} pages; breaks after {args.before} pages at 2 %.\n\n"
            f"{table}\n"
        )
        write_section(Path(__file__).with_name("RESULTS.md"), "drift", body)


if __name__ == "__main__":
    main()
