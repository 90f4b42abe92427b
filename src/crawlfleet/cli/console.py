"""How every command speaks to a person: dynamic text escaped, errors on one line.

Rich reads ``[...]`` as markup, so a URL, an error message or a name from a store is passed
through ``safe`` before it meets a format string (a URL with ``[/]`` would otherwise crash the
command). ``make_console`` is how a command gets one (full width when not on a terminal).
``fail`` is the one way a command stops on bad input: ``error: ...`` on one line of
stderr, credentials scrubbed, exit code 2.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from crawlfleet.redact import redact

USAGE_EXIT = 2
PIPE_WIDTH = 1000
"""Columns of a console whose stream is no terminal (a CI log, a file): tables at their full
width, not cut to rich's 80 (``COLUMNS`` still wins)."""


def make_console(*, stderr: bool = False) -> Console:
    """A console on stdout (or stderr) that renders tables at full width into a pipe or file."""
    stream = sys.stderr if stderr else sys.stdout
    piped = not os.environ.get("COLUMNS") and not stream.isatty()
    return Console(stderr=stderr, width=PIPE_WIDTH if piped else None)


def safe(value: object) -> str:
    """``value`` as text that rich prints as it is (markup escaped, credentials scrubbed)."""
    return escape(redact(str(value)))


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines included) made one space."""
    return " ".join(text.split())


def describe(exc: BaseException) -> str:
    """What went wrong, for a person: an ``OSError`` says what and where, not its errno."""
    if isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename}" if exc.filename is not None else ""
        return f"{exc.strerror}{where}"
    return str(exc) or type(exc).__name__


def fail(exc: BaseException | str, console: Console | None = None) -> NoReturn:
    """Print ``error: <what>`` as one line on stderr and exit with code 2."""
    text = exc if isinstance(exc, str) else describe(exc)
    (console or make_console(stderr=True)).print(
        f"[red]error:[/] {safe(one_line(text))}", soft_wrap=True
    )
    raise typer.Exit(USAGE_EXIT)
