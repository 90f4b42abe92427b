"""The nesting pre-check alone on real pages: CPU ms a page over the corpora's files on disk.

``parsing/budget.py`` ``nested_deeper_than`` at the default limit (2,000) over the HTML files
of the corpus benchmark's sites (``corpus_bench.py``: the Python docs, javadoc, rustdoc),
read from disk first; the best of ``--repeats`` passes, ``time.process_time``. Then the
hostile shapes of decisions 0047 and 0063, each refused or passed. Pass
``--src`` to measure another tree (a worktree of an older commit) the same way; since decision
0063 the scan is a C module built in place by ``pip install -e``, so such a tree needs its own
editable build (``pip install -e``) or must be one from before 0063.

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


def hostile_shapes() -> dict[str, bytes]:
    return {
        "100,000 unclosed <div> (500 KB)": b"<div>" * 100_000,
        "<div></span> x 100,000": b"<div></span>" * 100_000,
        "<a><b>x</b> x 100,000 (1.1 MB)": b"<a><b>x</b>" * 100_000,
        "<i></b></i> x 950,000 (9 MB: shallow)": b"<i></b></i>" * 950_000,
        "6 open around <g>x</g> x 1.2 million (9 MB)": b"<a><b><c><d><e><f>"
        + b"<g>x</g>" * 1_200_000,
        "<nN>x</nN> for a million distinct names (14 MB)": b"".join(
            b"<n%d>x</n%d>" % (n, n) for n in range(1_000_000)
        ),
        "< then 10 MB of a (one name)": b"<" + b"a" * 10_000_000,
        "10 MB of <": b"<" * 10_000_000,
    }


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
    for label, html in hostile_shapes().items():
        best = float("inf")
        for _ in range(args.repeats):
            started = time.process_time()
            refused = check(html, MAX_DEPTH)
            best = min(best, time.process_time() - started)
        print(f"{label}: {1000 * best:.2f} ms, {'refused' if refused else 'passed'}")


if __name__ == "__main__":
    main()
