"""Peak memory of a crawl of large pages does not grow with the concurrency (decision 0048).

Before the byte budgets, a crawl of 2 MB pages at concurrency 64 held every body it fetched
(and an idle pooled connection kept its last one): 64 pages in flight, peak RSS ~450 MB.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.cli import SRC
from tests.fixtures.large_pages import large_pages_site

PAGES = 100
PAGE_BYTES = 2 * 1024 * 1024
MAX_RSS_BYTES = 250 * 1024 * 1024  # what the crawl needs is ~170 MB: a wide margin


# The crawl reports its own peak: a child's ru_maxrss starts at its parent's RSS at the fork.
REPORTING_PEAK = (
    "import atexit, sys; "
    "atexit.register(lambda: print('peak', open('/proc/self/status').read()"
    ".split('VmHWM:')[1].split()[0], 'kB')); "
    "from crawlfleet.cli.main import app; app(sys.argv[1:], prog_name='crawlfleet')"
)


def peak_rss_bytes(args: list[str], cwd: Path) -> tuple[int, str]:
    """``crawlfleet ARGS`` run to its end: its peak resident set size and its output."""
    env = {**os.environ, "PYTHONPATH": SRC, "COLUMNS": "250"}
    argv = [sys.executable, "-c", REPORTING_PEAK, *args]
    result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    [peak_kib] = re.findall(r"^peak (\d+) kB$", result.stdout, re.MULTILINE)
    return int(peak_kib) * 1024, output


@pytest.mark.slow
def test_a_crawl_of_many_2_mb_pages_at_concurrency_64_stays_under_250_mb(tmp_path: Path) -> None:
    with large_pages_site(PAGES, PAGE_BYTES) as url:
        args = ["crawl", f"{url}/", "--concurrency", "64", "--per-domain-concurrency", "64"]
        args += ["--delay", "0", "--allow-private-addresses", "--state", str(tmp_path / "state")]
        rss_bytes, output = peak_rss_bytes(args, tmp_path)
    assert f"{PAGES + 1} done" in output, output
    assert rss_bytes < MAX_RSS_BYTES, f"peak RSS {rss_bytes / 2**20:.0f} MB"
