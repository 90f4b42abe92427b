"""Whole-or-nothing appends to a file, off the event loop: the core of the live-file sinks."""

from __future__ import annotations

import asyncio
import contextlib
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from crawlfleet.errors import StateError


class Appender:
    """Appends byte blocks to ``path``, one at a time, in call order.

    With ``fsync`` a returned ``append`` is on disk; without it, in the OS's hands. A failed
    append (disk full) is cut back off the file and raises ``StateError``, so the file never
    ends in half a block.
    """

    def __init__(self, path: Path, *, fsync: bool = True) -> None:
        self.path = path
        self._fsync = fsync
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StateError(f"cannot open {path} for writing: {exc}") from exc
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="appender")

    async def append(self, block: bytes) -> None:
        await asyncio.get_running_loop().run_in_executor(self._thread, self._append, block)

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._thread, os.close, self._fd)
        self._thread.shutdown()

    def _append(self, block: bytes) -> None:
        start = os.fstat(self._fd).st_size
        try:
            view = memoryview(block)
            while view:
                view = view[os.write(self._fd, view) :]
            if self._fsync:
                os.fsync(self._fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, start)
            raise StateError(f"cannot write to {self.path}: {exc}") from exc
