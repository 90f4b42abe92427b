"""``crawlfleet dashboard``: the web dashboard of an embedded crawl (``--state``) or of every
distributed crawl of a fleet (``--redis URL --postgres DSN``).

Serves the ASGI app of ``crawlfleet.dashboard`` with uvicorn on 127.0.0.1 (``--host`` to
change), read-only unless a token is given (``--token`` or ``CRAWLFLEET_DASHBOARD_TOKEN``),
with ``/metrics`` for the crawls it shows. An embedded crawl's state is read without
taking its locks; ``--config`` (or ``--delay``, ``--per-domain-concurrency``) gives the
crawl's default politeness, which its state file does not record, for the delays and the
ETA. A distributed crawl's settings come from its definition in Redis.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from crawlfleet.cli.console import fail, make_console, safe
from crawlfleet.errors import ConfigError, CrawlfleetError
from crawlfleet.redisurl import check_redis_url
from crawlfleet.settings.loading import load_settings

if TYPE_CHECKING:  # the dashboard's modules load with the command, not with every command
    from crawlfleet.ops.protocols import Operations

TOKEN_ENV = "CRAWLFLEET_DASHBOARD_TOKEN"
MIN_TOKEN_CHARS = 12

err = make_console(stderr=True)


def _extra_missing(exc: ImportError) -> ConfigError:
    return ConfigError(f"the dashboard needs crawlfleet installed with its dashboard extra ({exc})")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def dashboard(
    state: Annotated[
        Path | None, typer.Option("--state", help="state directory of an embedded crawl")
    ] = None,
    redis: Annotated[
        str | None,
        typer.Option(
            "--redis", envvar="CRAWLFLEET_REDIS_URL", help="Redis URL of the distributed crawls"
        ),
    ] = None,
    postgres: Annotated[
        str | None,
        typer.Option(
            "--postgres", envvar="CRAWLFLEET_POSTGRES_DSN", help="PostgreSQL DSN of their items"
        ),
    ] = None,
    config: Annotated[Path | None, typer.Option(help="the crawl's config (TOML)")] = None,
    delay: Annotated[float | None, typer.Option(help="the crawl's --delay")] = None,
    per_domain_concurrency: Annotated[
        int | None, typer.Option(help="the crawl's --per-domain-concurrency")
    ] = None,
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            help="a host name the dashboard answers for besides localhost and IP addresses "
            "(repeat for more; others get 421, against DNS rebinding)",
        ),
    ] = None,
    port: Annotated[int, typer.Option(min=0, max=65535)] = 8080,
    token: Annotated[
        str | None,
        typer.Option(
            envvar=TOKEN_ENV, show_envvar=True, help="allow actions (requeue, purge, pause)"
        ),
    ] = None,
) -> None:
    """Serve the web dashboard: crawls, progress, ETA, domains, workers, dead letters, items."""
    try:
        try:
            import uvicorn

            from crawlfleet.dashboard.app import create_app
            from crawlfleet.monitoring.metrics import Metrics
        except ImportError as exc:
            raise _extra_missing(exc) from None
        if token is not None and len(token) < MIN_TOKEN_CHARS:
            raise ConfigError(f"bad --token: use at least {MIN_TOKEN_CHARS} characters")
        if redis is not None or postgres is not None:
            if state is not None:
                raise ConfigError("give --state DIR (embedded) or --redis and --postgres, not both")
            source: Operations = _distributed(redis, postgres)
        else:
            source = _embedded(state, config, delay, per_domain_concurrency)
        app = create_app(source, token=token, metrics=Metrics(), allowed_hosts=allowed_host or ())
        where = f"http://{host}:{port}/"
        mode = "actions need the token" if token else "read-only (no --token)"
        err.print(f"dashboard of {safe(source.mode)} crawls at {safe(where)}, {mode}")
        if not _loopback(host):
            err.print(f"[yellow]warning:[/] listening on {safe(host)}, beyond this machine")
        uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
    except (CrawlfleetError, OSError) as exc:
        fail(exc, err)


def _distributed(redis: str | None, postgres: str | None) -> Operations:
    from crawlfleet.ops.distributed import DistributedOperations

    if redis is None or postgres is None:
        raise ConfigError("a distributed dashboard needs both --redis URL and --postgres DSN")
    source = DistributedOperations(check_redis_url(redis), postgres)
    asyncio.run(source.probe())
    return source


def _embedded(
    state: Path | None,
    config: Path | None,
    delay: float | None,
    per_domain_concurrency: int | None,
) -> Operations:
    if state is None:
        raise ConfigError(
            "give --state DIR (an embedded crawl) or --redis URL --postgres DSN (distributed)"
        )
    settings = load_settings(
        config,
        state_dir=state,
        delay_s=delay,
        per_domain_concurrency=per_domain_concurrency,
    )
    if not os.path.isdir(settings.state_dir):
        raise ConfigError(f"no state directory {settings.state_dir}")
    from crawlfleet.ops.embedded import EmbeddedOperations

    return EmbeddedOperations(settings)


def register(app: typer.Typer) -> None:
    app.command()(dashboard)
