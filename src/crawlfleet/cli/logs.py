"""How every command logs: one handler on stderr, at a level and in a format the user picks.

``crawlfleet [-v|-q] [--log-level LEVEL] [--log-format text|json] COMMAND``; the environment
variables ``CRAWLFLEET_LOG_LEVEL`` and ``CRAWLFLEET_LOG_FORMAT`` stand for the options. The
default level is INFO: the events the README calls "logged" (strategy-ladder changes, logins,
revisits) are INFO or above. ``-v`` is DEBUG, ``-q`` WARNING, ``-qq`` ERROR; ``--log-level``
wins over them. JSON lines carry ``at`` (ISO 8601, UTC), ``level``, ``logger`` and ``message``.
"""

from __future__ import annotations

import datetime as dt
import logging
import sys
from enum import StrEnum

import orjson

from crawlfleet.errors import ConfigError
from crawlfleet.redact import redact

DEFAULT_LEVEL = logging.INFO
_QUIET_LEVELS = (logging.INFO, logging.WARNING, logging.ERROR)


class LogFormat(StrEnum):
    TEXT = "text"
    JSON = "json"


def chosen_level(verbose: int, quiet: int, level: str | None) -> int:
    """The level ``-v``/``-q`` counts or a level name stand for (``ConfigError`` if unknown)."""
    if level is not None:
        named = logging.getLevelNamesMapping().get(level.strip().upper())
        if named is None:
            raise ConfigError(
                f"unknown log level {level!r} (DEBUG, INFO, WARNING, ERROR or CRITICAL)"
            )
        return named
    if verbose and quiet:
        raise ConfigError("give -v or -q, not both")
    if verbose:
        return logging.DEBUG
    return _QUIET_LEVELS[min(quiet, len(_QUIET_LEVELS) - 1)]


class _StderrHandler(logging.Handler):
    """Writes to the ``sys.stderr`` of the moment, so a live progress bar can redirect it."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(redact(self.format(record)) + "\n")
        except Exception:  # a logging failure must not stop the command (logging's own rule)
            self.handleError(record)


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {
            "at": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(line).decode()


def configure_logging(level: int, fmt: LogFormat) -> None:
    """Send the records of ``level`` and above to stderr in ``fmt`` (replacing any handler)."""
    handler = _StderrHandler()
    if fmt is LogFormat.JSON:
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for old in root.handlers[:]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
