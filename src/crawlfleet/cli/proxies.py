"""``crawlfleet proxies``: each proxy of a crawl's pool by id, its tier, state and health.

``--state DIR`` (embedded) or ``--redis URL --crawl-id ID`` (distributed). A proxy is shown by
its id and ``host:port``, never with its user name or password.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

import typer
from rich.table import Table

from crawlfleet.cli.console import fail, make_console, safe
from crawlfleet.cli.target import CrawlIdOpt, RedisOpt, StateOpt, target_settings
from crawlfleet.errors import CrawlfleetError
from crawlfleet.ops.target import open_operations
from crawlfleet.proxies.protocols import ProxyState
from crawlfleet.settings import Settings

out = make_console()
err = make_console(stderr=True)


def state_text(state: ProxyState, now: float) -> str:
    """``ok``, or ``quarantined until HH:MM:SS (N s)`` (UTC)."""
    if not state.quarantined(now):
        return "ok"
    until = datetime.fromtimestamp(state.quarantined_until, UTC).strftime("%H:%M:%S")
    return f"quarantined until {until} UTC ({state.quarantined_until - now:.0f} s)"


def proxy_table(states: list[ProxyState], now: float) -> Table:
    table = Table(title="proxies")
    for column in ("proxy", "address", "tier", "state", "successes", "bans", "errors", "latency"):
        table.add_column(
            column,
            justify="right" if column in ("tier", "successes", "bans", "errors") else "left",
            no_wrap=column in ("proxy", "address"),
        )
    for state in sorted(states, key=lambda s: (s.tier, s.id)):
        table.add_row(
            safe(state.id),
            safe(state.label),
            str(state.tier),
            state_text(state, now),
            str(state.successes),
            str(state.bans),
            str(state.errors),
            f"{state.latency_s * 1000:.0f} ms" if state.successes else "-",
        )
    return table


async def read_states(settings: Settings) -> list[ProxyState]:
    """The proxy records of the crawl ``settings`` name; ``StateError`` if there is none."""
    async with open_operations(settings) as (ops, crawl):
        return await ops.proxies(crawl)


def proxies(state: StateOpt = None, redis: RedisOpt = None, crawl_id: CrawlIdOpt = None) -> None:
    """List the crawl's proxies: tier, ok or quarantined until when, successes and bans."""
    try:
        found = asyncio.run(read_states(target_settings(state, redis, crawl_id)))
    except (CrawlfleetError, OSError) as exc:
        fail(exc, err)
    if not found:
        out.print("no proxies recorded for this crawl (it has no \\[crawl.proxies])")
        return
    out.print(proxy_table(found, time.time()))


def register(app: typer.Typer) -> None:
    app.command()(proxies)
