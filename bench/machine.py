"""A one-paragraph description of the machine and the versions a benchmark ran with."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
SCRAPY_PYTHON = BENCH / "_work" / "scrapy-venv" / "bin" / "python"


def _output(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "n/a"
    return (done.stdout or done.stderr).strip().splitlines()[0] if done.returncode == 0 else "n/a"


def busy_cpu_s() -> float:
    """CPU seconds every process on the machine has used since boot (all but idle and iowait)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    jiffies = [int(f) for f in fields[:8]]
    idle = jiffies[3] + jiffies[4]
    return (sum(jiffies) - idle) / os.sysconf("SC_CLK_TCK")


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def describe_machine() -> str:
    scrapy = _output(
        [str(SCRAPY_PYTHON), "-c", "import scrapy, sys; print(scrapy.__version__, sys.version)"]
    )
    commit = _output(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"])
    nginx = _output(["nginx", "-v"])
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"Date: {now}. Machine: {os.cpu_count()} CPUs ({cpu_model()}), "
        f"{platform.system()} {platform.release()}. crawlfleet at commit {commit} on Python "
        f"{platform.python_version()}; Scrapy {scrapy.split()[0]} on Python "
        f"{' '.join(scrapy.split()[1:2])}; {nginx}."
    )
