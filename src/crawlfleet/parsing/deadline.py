"""A deadline for work run on the main thread: a one-shot ``ITIMER_REAL`` and ``SIGALRM``.

CPython runs signal handlers in the main thread between bytecodes, so a handler that raises
stops pure-Python work at its deadline: a parser stuck in a loop, or waiting, is stopped
where it is (a parser in a worker thread cannot be stopped at all). C code that holds the GIL
(a regular expression, lexbor building a tree) is stopped when it returns to Python.

One handler serves the whole process. It is installed on first use when ``SIGALRM`` still has
its default disposition and left in place (an alarm while nothing is armed is ignored). A
process whose code handles ``SIGALRM`` itself keeps its handler: ``usable`` is then False, as
it is on any thread but the main one, and the caller runs its work another way.
"""

from __future__ import annotations

import _signal  # getsignal without the public one's enum conversion: 0.02 against 1.5 µs
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import TypeVar

T = TypeVar("T")


class DeadlinePassed(BaseException):
    """Raised into the work when its deadline passes. A ``BaseException``, as
    ``KeyboardInterrupt`` is, so that the work's own ``except Exception`` does not swallow it."""


class _MainThreadDeadline:
    def __init__(self) -> None:
        self._armed = False

    def usable(self) -> bool:
        """Whether ``run`` can bound work started from the calling thread."""
        if threading.current_thread() is not threading.main_thread():
            return False
        current = _signal.getsignal(signal.SIGALRM)
        if current == self._on_alarm:
            return True
        if current != signal.SIG_DFL:
            return False
        signal.signal(signal.SIGALRM, self._on_alarm)
        return True

    def run(self, seconds: float, work: Callable[[], T]) -> T:
        """``work()``, interrupted by ``DeadlinePassed`` once ``seconds`` have passed.

        Call only after ``usable()`` returned True on this thread.
        """
        try:
            self._armed = True
            signal.setitimer(signal.ITIMER_REAL, seconds)
            try:
                return work()
            finally:
                self._disarm()
        except DeadlinePassed:
            # Raised in the work, or while disarming after it: either way the time was up.
            self._disarm()
            raise

    def _disarm(self) -> None:
        # Cleared first: an alarm handled from here on finds nothing armed.
        self._armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)

    def _on_alarm(self, signum: int, frame: FrameType | None) -> None:
        if self._armed:
            self._armed = False
            raise DeadlinePassed


MAIN_THREAD_DEADLINE = _MainThreadDeadline()
