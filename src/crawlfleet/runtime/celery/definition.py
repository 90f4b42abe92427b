"""A distributed crawl's definition in Redis, and the Redis keys the Celery runtime owns.

Keys (``{p}`` is the crawl's prefix ``crawlfleet:<crawl_id>``, shared with the frontier's
keys listed in ``frontier/redis/keys.py``):

===================================  ======  ========================================================
key                                  type    contents
===================================  ======  ========================================================
``crawlfleet:crawls``                SET     crawl ids being dispatched now; workers skip tasks of
                                             any other crawl
``crawlfleet:workers``               HASH    worker name -> JSON ``{"seen_at", "queues",
                                             "concurrency", "crawl", "in_flight", "pages",
                                             "refused"}``,
                                             written by that worker only (one ``HSET``) before
                                             every task and each second while it runs:
                                             ``in_flight`` steps running now, ``pages`` steps the
                                             process ran to an outcome since it started (the
                                             dashboard's pages/s is its rate), ``refused`` crawl
                                             id -> why the worker refuses that crawl's tasks
                                             (its ``--parsers``), also written at each refusal
``crawlfleet:dispatchers``           HASH    crawl id -> JSON ``{"seen_at", "host", "pid"}``: the
                                             crawl's dispatcher, written at its start and every
                                             ``BEAT_EVERY_S`` while it runs; a dispatched crawl whose
                                             entry is old has lost its dispatcher (``status``)
``{p}:definition``                   STRING  JSON ``{"settings": {...}, "seeds": [...], "run": id}``:
                                             the validated settings without the Redis URL and the
                                             PostgreSQL DSN (workers bring their own); ``run`` is
                                             new for each dispatcher run, so workers rebuild their
                                             per-crawl caches
``{p}:reparse:<job>:definition``     STRING  a distributed reparse's settings (``reparse_jobs.py``),
                                             as ``{p}:definition`` without seeds; expires in 7 days
``{p}:reparse:<job>:files``          HASH    WARC file name -> JSON figures of its reparse (or
                                             ``{"error"}``), written by the worker that ran its task;
                                             the command waits until every file has one, then
                                             deletes both keys
===================================  ======  ========================================================
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from crawlfleet.errors import ConfigError
from crawlfleet.settings import Settings

ROOT = "crawlfleet"
ACTIVE_CRAWLS = f"{ROOT}:crawls"
WORKERS = f"{ROOT}:workers"
DISPATCHERS = f"{ROOT}:dispatchers"
SECRET_FIELDS = ("redis_url", "postgres_dsn")
SHOWN_REFUSALS = 3


def crawl_prefix(crawl_id: str) -> str:
    """The Redis key prefix of every key of one crawl (frontier and runtime)."""
    return f"{ROOT}:{crawl_id}"


def definition_key(crawl_id: str) -> str:
    return f"{crawl_prefix(crawl_id)}:definition"


def reparse_definition_key(crawl_id: str, job: str) -> str:
    return f"{crawl_prefix(crawl_id)}:reparse:{job}:definition"


def reparse_files_key(crawl_id: str, job: str) -> str:
    return f"{crawl_prefix(crawl_id)}:reparse:{job}:files"


@dataclass(frozen=True, slots=True)
class CrawlDefinition:
    """What every worker needs to build a crawl's object graph."""

    settings: Settings
    seeds: tuple[str, ...]
    run: str = ""

    @property
    def crawl_id(self) -> str:
        return self.settings.crawl_id

    def to_json(self) -> bytes:
        data = self.settings.model_dump(mode="json", exclude=set(SECRET_FIELDS))
        return orjson.dumps({"settings": data, "seeds": list(self.seeds), "run": self.run})

    @classmethod
    def from_json(cls, raw: str | bytes) -> CrawlDefinition:
        """Parse a stored definition; ``ConfigError`` if it is not one."""
        try:
            data: Any = orjson.loads(raw)
            settings = Settings.model_validate(data["settings"])
            seeds = tuple(str(seed) for seed in data["seeds"])
            run = str(data.get("run", ""))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValidationError) as exc:
            raise ConfigError(f"stored crawl definition is unreadable: {exc}") from None
        return cls(settings, seeds, run)


def parser_key(source: str) -> str | None:
    """How a parser source is compared: a ``.py`` path by the file it resolves to here (from
    the working directory, as the loader imports it), a module by its dotted name; None for a
    path that cannot be resolved (never allowed)."""
    source = source.strip()
    if source.endswith(".py") or "/" in source or "\\" in source:
        try:
            return str(Path(source).resolve())
        except (OSError, ValueError):
            return None
    return source


def check_parsers(definition: CrawlDefinition, allowed: Iterable[str]) -> None:
    """``ConfigError`` (one line) if ``definition`` names a parser module not in ``allowed``.

    A worker imports, and so runs, the parser modules a crawl definition names; anyone who can
    write the definition to Redis could name any module. ``allowed`` is what the worker's
    operator passed to ``crawlfleet worker --parsers``. Selector parsers (no code) and the
    entry points installed on the worker's host (parsers, sinks) need no allowing. The modules
    of the definition's ``processors`` and ``hooks`` (``module:object``) are code the worker
    imports too: they need the same allowing.
    """
    permitted = {parser_key(source) for source in allowed} - {None}
    settings = definition.settings
    named = [
        *settings.parsers,
        *(ref.rpartition(":")[0] or ref for ref in (*settings.processors, *settings.hooks)),
    ]
    refused = [s for s in named if parser_key(s) not in permitted]
    if not refused:
        return
    shown = ", ".join(repr(source[:120]) for source in refused[:SHOWN_REFUSALS])
    more = f" and {len(refused) - SHOWN_REFUSALS} more" if len(refused) > SHOWN_REFUSALS else ""
    raise ConfigError(
        f"crawl {definition.crawl_id!r} names parser, processor or hook module(s) this worker "
        "was not started to "
        f"allow: {shown}{more} (crawlfleet worker --parsers ...)"
    )
