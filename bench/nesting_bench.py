"""The nesting pre-check alone on real pages: CPU ms a page over the corpora's files on disk.

``parsing/budget.py`` ``nested_deeper_than`` at the default limit (2,000) over the HTML files
of the corpus benchmark's sites (``corpus_bench.py``: the Python docs, javadoc, rustdoc),
read from disk first; the best of ``--repeats`` passes, ``time.process_time``. Pass
``--src`` to measure another tree (a worktree of an older commit) the same way.

    .venv/bin/python bench/nesting_bench.py
    .venv/bin/python bench/nesting_bench.py --src ../before/src --pages 600
"""

from __future__ import annotations

import argparse
import importlib
import random
import sys
import time
from pathlib import Path

CORPORA = {
    "python-docs": Path("/usr/share/doc/python3.11/html"),
    "javadoc": Path("/usr/share/doc/openjdk-17-jre-headless/api"),
    "rustdoc": Path("/usr/share/doc/rust-doc/html"),
}
MAX_DEPTH = 2000  # the default max_html_nesting_depth


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=Path(__file__).parent.parent / "src")
    parser.add_argument("--pages", type=int, default=600, help="a random sample per corpus")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, str(args.src.resolve()))
    check = importlib.import_module("crawlfleet.parsing.budget").nested_deeper_than
    for name, root in CORPORA.items():
        files = sorted(root.rglob("*.html"))
        random.Random(0).shuffle(files)
        pages = [path.read_bytes() for path in files[: args.pages]]
        best = float("inf")
        for _ in range(args.repeats):
            started = time.process_time()
            for page in pages:
                check(page, MAX_DEPTH)
            best = min(best, time.process_time() - started)
        kib = sum(map(len, pages)) / len(pages) / 1024
        print(
            f"{name}: {len(pages)} pages of {kib:.0f} KiB (mean), "
            f"{1000 * best / len(pages):.4f} ms a page (best of {args.repeats})"
        )


if __name__ == "__main__":
    main()
