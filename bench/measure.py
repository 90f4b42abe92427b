"""Run one command to completion (or its time limit) and measure what its process tree used."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProcessUsage:
    """Wall time, CPU time and peak RSS of a process and every descendant it waited for.

    ``peak_rss_mb`` is the largest ``VmHWM`` (the kernel's high-water mark of the resident
    set) of any single process in the tree (not a sum), read from ``/proc`` while the tree
    runs. Not ``ru_maxrss``: that one survives fork and exec, so a child of a bench process
    that holds 2 GB would report 2 GB. A process that lives less than one sampling period
    may be missed; the crawlers' own processes live for the whole run.
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
        sampler = _PeakSampler(process.pid)
        sampler.start()
        try:
            _, status, usage = os.wait4(process.pid, 0)
        finally:
            timer.cancel()
            sampler.stop()
        wall_s = time.monotonic() - start
    process.returncode = os.waitstatus_to_exitcode(status)  # already reaped by wait4
    return ProcessUsage(
        wall_s=wall_s,
        user_s=usage.ru_utime,
        sys_s=usage.ru_stime,
        peak_rss_mb=sampler.peak_mb,
        exit_code=process.returncode,
        timed_out=timed_out.is_set(),
    )


class _PeakSampler(threading.Thread):
    """Reads ``VmHWM`` of a process and its descendants every ``period_s`` until stopped."""

    def __init__(self, root: int, period_s: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.period_s = period_s
        self.peak_mb = 0.0
        self._stopping = threading.Event()

    def run(self) -> None:
        while not self._stopping.wait(self.period_s):
            for pid in descendants(self.root):
                self.peak_mb = max(self.peak_mb, high_water_mb(pid))

    def stop(self) -> None:
        self._stopping.set()
        self.join()


def descendants(root: int) -> list[int]:
    """``root`` and every process below it, from ``/proc/PID/task/*/children``."""
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        with contextlib.suppress(OSError):  # the process may be gone meanwhile
            for children in Path(f"/proc/{pid}/task").glob("*/children"):
                with contextlib.suppress(OSError):
                    todo.extend(int(child) for child in children.read_text().split())
    return found


def high_water_mb(pid: int) -> float:
    """The peak resident set of ``pid`` so far (``VmHWM``), 0 once it is gone."""
    with contextlib.suppress(OSError):
        status = Path(f"/proc/{pid}/status").read_text()
        found = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
        if found:
            return int(found.group(1)) / 1024
    return 0.0


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
