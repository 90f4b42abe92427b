"""Which crawl a command acts on: ``--state DIR`` (embedded) or ``--redis URL --crawl-id ID``.

The options every operating command shares (``dlq``, ``pause``, ``resume``, ``proxies``...)
and the settings they stand for; ``ops.target.open_operations`` opens that crawl's
operations.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from crawlfleet.errors import ConfigError
from crawlfleet.redisurl import check_redis_url
from crawlfleet.settings import Settings
from crawlfleet.settings.loading import describe_validation_error

DEFAULT_STATE = Path(".crawlfleet")

StateOpt = Annotated[
    Path | None,
    typer.Option("--state", help="state directory of an embedded crawl [default: .crawlfleet]"),
]
REDIS_ENV = "CRAWLFLEET_REDIS_URL"
CRAWL_ID_ENV = "CRAWLFLEET_CRAWL_ID"
POSTGRES_ENV = "CRAWLFLEET_POSTGRES_DSN"
RedisOpt = Annotated[
    str | None,
    typer.Option("--redis", envvar=REDIS_ENV, help="Redis URL of a distributed crawl"),
]
PostgresOpt = Annotated[
    str | None,
    typer.Option("--postgres", envvar=POSTGRES_ENV, help="PostgreSQL DSN of a distributed crawl"),
]
CrawlIdOpt = Annotated[
    str | None,
    typer.Option(
        "--crawl-id",
        envvar=CRAWL_ID_ENV,
        help="the distributed crawl (with --redis) [default: default]",
    ),
]


def from_environment(value: str | None, name: str) -> bool:
    """Whether an option's ``value`` is that of the environment variable ``name`` (unset if so).

    A ``--state DIR`` given on the command line wins over a ``CRAWLFLEET_REDIS_URL`` (or
    ``CRAWLFLEET_CRAWL_ID``) in the environment, as a flag wins over a variable everywhere.
    """
    return value is not None and value == os.environ.get(name)


def postgres_or_state(postgres: str | None, state: Path | None) -> str | None:
    """The PostgreSQL DSN to read, or None for the state directory: an explicit ``--state``
    wins over ``CRAWLFLEET_POSTGRES_DSN``; ``ConfigError`` when both are given as flags."""
    if state is not None and from_environment(postgres, POSTGRES_ENV):
        return None
    if postgres is not None and state is not None:
        raise ConfigError("give --state DIR (embedded) or --postgres DSN, not both")
    return postgres


def target_settings(state: Path | None, redis: str | None, crawl_id: str | None) -> Settings:
    """The settings naming the crawl the options point at (``ConfigError`` when they clash).

    ``--redis`` and ``--crawl-id`` may come from ``CRAWLFLEET_REDIS_URL`` and
    ``CRAWLFLEET_CRAWL_ID``; an explicit ``--state`` wins over them (``from_environment``).
    """
    if state is not None:
        redis = None if from_environment(redis, REDIS_ENV) else redis
        crawl_id = None if from_environment(crawl_id, CRAWL_ID_ENV) else crawl_id
    if redis is not None and state is not None:
        raise ConfigError("give --state DIR (embedded) or --redis URL (distributed), not both")
    try:
        if redis is None:
            if crawl_id is not None:
                raise ConfigError("--crawl-id names a distributed crawl: give --redis URL too")
            return Settings(state_dir=state or DEFAULT_STATE, redis_url=None)
        return Settings(redis_url=check_redis_url(redis), crawl_id=crawl_id or "default")
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc, None)) from None
