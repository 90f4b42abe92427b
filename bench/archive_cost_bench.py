"""What archiving costs a crawl: the bench site crawled with and without an archive, alternated.

    .venv/bin/python bench/archive_cost_bench.py --rounds 6            # pages sent as is
    .venv/bin/python bench/archive_cost_bench.py --rounds 6 --gzip     # sent gzip-coded

Each round runs ``crawl_bench.py --tools crawlfleet --runs 1 --no-results`` twice, without
and with ``CRAWLFLEET_ARCHIVE`` (a fresh directory each time), and reads the run's
``result.json``: CPU of the crawl process (user + system) a response, and whether the crawl
was exact. Prints every round and the medians (decision 0064).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
RUN = BENCH / "_work" / "runs" / "crawlfleet-1" / "result.json"


def crawl(args: argparse.Namespace, archive: Path | None) -> tuple[float, bool]:
    """CPU ms a response of one crawl, and whether it was exact."""
    env = {k: v for k, v in os.environ.items() if k != "CRAWLFLEET_ARCHIVE"}
    if archive is not None:
        shutil.rmtree(archive, ignore_errors=True)
        env["CRAWLFLEET_ARCHIVE"] = str(archive)
    argv = [sys.executable, str(BENCH / "crawl_bench.py"), "--tools", "crawlfleet", "--runs", "1"]
    argv += ["--no-results", "--pages", str(args.pages), *(["--gzip"] if args.gzip else [])]
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, timeout=args.timeout_s)
    result = json.loads(RUN.read_text())
    usage, verdict = result["usage"], result["verdict"]
    exact = not (verdict["missed"] or verdict["duplicates"] or verdict["unexpected"])
    return (usage["user_s"] + usage["sys_s"]) * 1000 / verdict["responses"], exact


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--pages", type=int, default=4000)
    parser.add_argument("--gzip", action="store_true", help="nginx sends HTML gzip-coded")
    parser.add_argument("--timeout-s", type=float, default=600.0)
    args = parser.parse_args()
    without: list[float] = []
    with_archive: list[float] = []
    with tempfile.TemporaryDirectory(prefix="archive-cost-") as tmp:
        for n in range(1, args.rounds + 1):
            plain, plain_exact = crawl(args, None)
            kept, kept_exact = crawl(args, Path(tmp) / "warc")
            without.append(plain)
            with_archive.append(kept)
            print(
                f"round {n}: without {plain:.3f} ms a page, with the archive {kept:.3f} "
                f"({kept / plain - 1:+.1%}){'' if plain_exact and kept_exact else ' NOT EXACT'}",
                flush=True,
            )
    a, b = statistics.median(without), statistics.median(with_archive)
    print(f"medians: without {a:.3f} ms a page, with {b:.3f}: archiving costs {b / a - 1:+.1%}")


if __name__ == "__main__":
    main()
