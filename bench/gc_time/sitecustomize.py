"""Time spent in Python's garbage collector, per process: put this folder on ``PYTHONPATH``.

    CRAWLFLEET_BENCH_GC_LOG=/tmp/gc.txt PYTHONPATH=bench/gc_time \
        .venv/bin/python bench/distributed_speed.py --pages 20000 --modes embedded dist1 --runs 1

Every Python process started with it (the crawl, the dispatcher, each worker, the bench
itself) appends one line to the file when it exits: its command, its collector thresholds,
and per generation the collections, the CPU seconds they took and the objects they freed.
Without ``CRAWLFLEET_BENCH_GC_LOG`` it does nothing. Decision 0026.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
import time

LOG = os.environ.get("CRAWLFLEET_BENCH_GC_LOG")


def _install(log: str) -> None:
    totals = {generation: [0, 0.0, 0] for generation in range(3)}
    started = [0.0]

    def timed(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.process_time()
            return
        total = totals[info["generation"]]
        total[0] += 1
        total[1] += time.process_time() - started[0]
        total[2] += info["collected"]

    def report() -> None:
        parts = [
            f"gen{generation}: {n} collections {cpu_s:.2f} CPU s {freed} freed"
            for generation, (n, cpu_s, freed) in totals.items()
        ]
        command = " ".join(sys.argv[:2])
        with open(log, "a") as out:
            out.write(f"{command} threshold={gc.get_threshold()} {'; '.join(parts)}\n")

    gc.callbacks.append(timed)
    atexit.register(report)


if LOG:
    _install(LOG)
