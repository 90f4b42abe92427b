"""The resident memory of a browser: its process and every descendant, read from ``/proc``.

Chromium runs a browser process, a zygote, renderers, a GPU and a network service process;
their RSS summed is what a memory cap must bound (shared pages count once per process, so the
sum is an upper bound of what the tree holds).
"""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def _processes() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, resident bytes) of every readable process."""
    found: dict[int, tuple[int, int]] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            statm = (entry / "statm").read_text()
        except OSError:  # the process ended while we looked
            continue
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        found[int(entry.name)] = (parent, int(statm.split()[1]) * _PAGE_BYTES)
    return found


def _roots(marker: str, pids: dict[int, tuple[int, int]]) -> set[int]:
    roots = set()
    for pid in pids:
        try:
            cmdline = (PROC / str(pid) / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            roots.add(pid)
    return roots


def _with_descendants(roots: set[int], pids: dict[int, tuple[int, int]]) -> set[int]:
    tree = set(roots)
    grew = True
    while grew:
        grew = False
        for pid, (parent, _) in pids.items():
            if parent in tree and pid not in tree:
                tree.add(pid)
                grew = True
    return tree


def tree_rss_bytes(marker: str) -> int:
    """Summed RSS of the processes whose command line holds ``marker`` and their descendants."""
    pids = _processes()
    tree = _with_descendants(_roots(marker, pids), pids)
    return sum(pids[pid][1] for pid in tree)


def tree_pids(marker: str) -> list[int]:
    """The browser process(es) started with ``marker`` (the root of the tree first)."""
    pids = _processes()
    return sorted(_roots(marker, pids))


def descendants_named(root: int, name: str) -> list[int]:
    """Pids below ``root`` whose command name contains ``name`` (tests: no Chromium here)."""
    pids = _processes()
    found = []
    for pid in _with_descendants({root}, pids) - {root}:
        try:
            comm = (PROC / str(pid) / "comm").read_text()
        except OSError:
            continue
        if name in comm:
            found.append(pid)
    return found
