"""Run one command to completion (or its time limit) and measure what its process tree used."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProcessUsage:
    """Wall time, CPU time and peak RSS of a process and every descendant it waited for.

    ``peak_rss_mb`` is ``ru_maxrss`` from ``wait4``: the largest resident set of any single
    process in the tree (not a sum), which for both crawlers is the crawler process itself.
    """

    wall_s: float
    user_s: float
    sys_s: float
    peak_rss_mb: float
    exit_code: int
    timed_out: bool

    @property
    def cpu_s(self) -> float:
        return self.user_s + self.sys_s


def run_measured(
    argv: list[str], *, timeout_s: float, log_path: Path, cwd: Path | None = None
) -> ProcessUsage:
    """Run ``argv`` in its own session with stdout+stderr to ``log_path``.

    Past ``timeout_s`` the session gets SIGTERM, and SIGKILL 10 s later.
    """
    timed_out = threading.Event()
    with log_path.open("wb") as log:
        start = time.monotonic()
        process = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, cwd=cwd, start_new_session=True
        )

        def expire() -> None:
            timed_out.set()
            _signal_group(process.pid, signal.SIGTERM)
            if not _exited_within(process.pid, 10.0):
                _signal_group(process.pid, signal.SIGKILL)

        timer = threading.Timer(timeout_s, expire)
        timer.start()
        try:
            _, status, usage = os.wait4(process.pid, 0)
        finally:
            timer.cancel()
        wall_s = time.monotonic() - start
    process.returncode = os.waitstatus_to_exitcode(status)  # already reaped by wait4
    return ProcessUsage(
        wall_s=wall_s,
        user_s=usage.ru_utime,
        sys_s=usage.ru_stime,
        peak_rss_mb=usage.ru_maxrss / 1024,  # Linux reports KiB
        exit_code=process.returncode,
        timed_out=timed_out.is_set(),
    )


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


def _exited_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False
