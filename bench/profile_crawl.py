"""Where crawlfleet's crawl time goes: one benchmark crawl under py-spy, summarized.

Runs the same crawlfleet command as crawl_bench.py on the generated site (generate it first
with crawl_bench.py or gen_site.py), sampled by py-spy, and prints the functions with the
largest inclusive and self shares of the samples (idle time excluded); writes that to
bench/RESULTS.md, and an SVG flame graph next to the raw samples in bench/_work/profile/.

    .venv/bin/pip install py-spy
    .venv/bin/python bench/profile_crawl.py [--top 40]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

from crawl_bench import BENCH, WORK, command
from machine import describe_machine
from nginx_server import NginxServer
from results import write_section

ENTRY_SHARE = 0.8
PY_SPY = BENCH.parent / ".venv" / "bin" / "py-spy"


def frame_name(frame: str) -> str:
    """``func (path/to/module.py:12)`` -> ``func (to/module.py)``: lines merged."""
    function, _, location = frame.partition(" (")
    path = location.rsplit(":", 1)[0]
    return f"{function} ({'/'.join(path.split('/')[-2:])})" if location else function


def summarize(raw: Path, top: int) -> str:
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        count = int(count_text)
        frames = [frame_name(f) for f in stack.split(";")[1:]]  # [0] is the process
        if not frames:
            continue
        total += count
        own[frames[-1]] += count
        for name in set(frames):
            inclusive[name] += count
    # Frames on (nearly) every stack are the way into the event loop (CLI, asyncio): skip them.
    below = [(name, n) for name, n in inclusive.most_common() if n < ENTRY_SHARE * total]
    lines = [f"{total} samples (busy only)", "", "inclusive (entry frames omitted):"]
    lines += [f"{100 * n / total:5.1f}%  {name}" for name, n in below[:top]]
    lines += ["", "self:"]
    lines += [f"{100 * n / total:5.1f}%  {name}" for name, n in own.most_common(top)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--rate-hz", type=int, default=200)
    parser.add_argument("--timeout-s", type=float, default=600.0)
    parser.add_argument("--results", type=Path, default=BENCH / "RESULTS.md")
    parser.add_argument("--no-results", action="store_true", help="print only")
    parser.add_argument("--site", type=Path, default=WORK / "site", help="a generated site")
    parser.add_argument("--gil", action="store_true", help="sample only the thread holding the GIL")
    args = parser.parse_args()
    site = args.site
    if not PY_SPY.exists() or not (site / "manifest.json").exists():
        sys.exit("needs py-spy in .venv and a generated site (run crawl_bench.py once)")
    manifest = json.loads((site / "manifest.json").read_text())
    out = WORK / "profile"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    crawl = command("crawlfleet", manifest["seeds"], out, BENCH / "bench_parsers.py")
    spy = [str(PY_SPY), "record", "--rate", str(args.rate_hz), "--subprocesses"]
    spy += ["--gil"] if args.gil else []
    with NginxServer(site, WORK / "nginx", list(manifest["hosts"]), manifest["port"]):
        for fmt, name in (("raw", "samples.txt"), ("flamegraph", "flame.svg")):
            argv = [*spy, "--format", fmt, "-o", str(out / name), "--", *crawl]
            subprocess.run(argv, check=True, timeout=args.timeout_s, capture_output=True)
    summary = summarize(out / "samples.txt", args.top)
    print(f"{summary}\n\nflame graph: {out / 'flame.svg'}")
    if not args.no_results:
        body = (
            "## Profile: where crawlfleet's crawl time goes\n\n"
            f"{describe_machine()}\n\npy-spy at {args.rate_hz} Hz on one crawl of the site "
            f"above (same command as the crawl benchmark); shares of busy samples, "
            f"{'the thread holding the GIL' if args.gil else 'all threads'}."
            f"\n\n```\n{summary}\n```\n\nRerun: `.venv/bin/python bench/profile_crawl.py"
            f"{' --gil' if args.gil else ''}`\n"
        )
        write_section(args.results, "profile", body)


if __name__ == "__main__":
    main()
