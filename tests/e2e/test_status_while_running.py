"""Every command tells the truth while the crawl runs (issue #37.6 and #37.7): ``status
--state`` reads a running crawl read-only, with the delay the crawl runs with, and the
progress line says when the crawl is paused."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from crawlfleet.demosite import ThreadedDemoSite
from tests.fixtures.cli import CRAWLFLEET, SRC, run_cli

WAIT_S = 30.0


def wait_for(path: Path, text: str) -> str:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        found = path.read_text() if path.exists() else ""
        if text in found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"{text!r} never appeared in {path}: {found}")


def test_status_reads_a_paused_running_crawl_with_its_own_delay(
    testsite: ThreadedDemoSite, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "paused").touch()  # paused before it starts: it claims nothing until resumed
    log = tmp_path / "crawl.log"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CRAWLFLEET_")},
        "PYTHONPATH": SRC,
    }
    args = [testsite.url("quotes"), "--state", str(state), "--delay", "0"]
    with log.open("w") as sink:
        crawl = subprocess.Popen(
            [CRAWLFLEET, "crawl", *args, "--allow-private-addresses", "--progress-every", "0.2"],
            stdout=sink, stderr=subprocess.STDOUT, env=env, cwd=tmp_path,
        )  # fmt: skip
    try:
        wait_for(log, "progress: paused · 0/1 done")
        status = run_cli("status", "--state", str(state), cwd=tmp_path)
        assert status.returncode == 0, status.stderr
        assert f"crawl in {state} (paused): 1 queued" in status.stdout
        row = next(line for line in status.stdout.splitlines() if "127.0.0.3" in line)
        assert "0 s (cli)" in row, status.stdout
        resumed = run_cli("resume", "--state", str(state), cwd=tmp_path)
        assert resumed.returncode == 0, resumed.stderr
        assert crawl.wait(timeout=WAIT_S) == 0, log.read_text()
    finally:
        crawl.kill()
        crawl.wait()
    after = run_cli("status", "--state", str(state), cwd=tmp_path)
    assert "(paused)" not in after.stdout
    assert "0 s (cli)" in after.stdout
