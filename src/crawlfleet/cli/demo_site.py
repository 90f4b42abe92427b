"""The ``crawlfleet demo-site`` command: serve the local demo site until interrupted."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from crawlfleet.cli.console import fail, make_console, safe

if TYPE_CHECKING:
    from crawlfleet.demosite import DemoSite

DEFAULT_PORT = 8800


def register(app: typer.Typer) -> None:
    """Add the ``demo-site`` command (and ``demo-site edit``) to ``app``."""
    group = typer.Typer(invoke_without_command=True, no_args_is_help=False)
    app.add_typer(group, name="demo-site")
    group.command("edit")(edit)

    @group.callback()
    def demo_site(
        ctx: typer.Context,
        port: Annotated[int, typer.Option(help="TCP port on every address (0: any free one).")] = (
            DEFAULT_PORT
        ),
        access_log: Annotated[
            Path | None, typer.Option(help="Append every request to this file as JSON lines.")
        ] = None,
        crawl_delay_s: Annotated[
            float, typer.Option(help="Crawl-delay announced by the slow-robots host.")
        ] = 2.0,
        address: Annotated[
            list[str] | None,
            typer.Option(
                help="ROLE=IP: serve ROLE on IP instead of its 127.0.0.x address (repeatable; "
                "a site in a network namespace or container of its own)"
            ),
        ] = None,
        redesign_after: Annotated[
            int | None,
            typer.Option(
                min=0, help="the redesign host changes its templates after this many item pages"
            ),
        ] = None,
    ) -> None:
        """Serve the demo site (shop, quotes, lab, ...) on loopback addresses until Ctrl-C."""
        if ctx.invoked_subcommand is not None:
            return
        from crawlfleet.demosite import DemoSite  # aiohttp's server: not for other commands

        try:
            addresses = role_addresses(address or [])
            site = DemoSite(
                port=port,
                addresses=addresses,
                access_log_path=access_log,
                crawl_delay_s=crawl_delay_s,
            )
            site.redesign.set(redesign_after)
        except ValueError as exc:
            fail(str(exc))
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_serve(site, make_console()))


def edit(
    reprice: Annotated[
        list[str] | None,
        typer.Option(help="ID:PENCE: show product ID at this price (repeatable; 4:1399)"),
    ] = None,
    remove: Annotated[
        list[int] | None, typer.Option(help="ID: product ID's page answers 404 (repeatable)")
    ] = None,
    reset: Annotated[bool, typer.Option(help="undo every edit first")] = False,
    port: Annotated[int, typer.Option(help="the running demo site's port")] = DEFAULT_PORT,
    address: Annotated[str | None, typer.Option(help="the shop's IP, if moved")] = None,
) -> None:
    """Change the running demo shop's catalogue (prices, removals), to try the change feed."""
    from crawlfleet.demosite.catalogue import EDIT_PATH
    from crawlfleet.demosite.roles import DEFAULT_ADDRESSES, SHOP

    fields = [("reprice", value) for value in reprice or []]
    fields += [("remove", str(value)) for value in remove or []]
    fields += [("reset", "1")] if reset else []
    if not fields:
        fail("nothing to edit: give --reprice ID:PENCE, --remove ID or --reset")
    host = address or DEFAULT_ADDRESSES[SHOP]
    url = f"http://{host}:{port}{EDIT_PATH}"
    request = urllib.request.Request(url, data=urllib.parse.urlencode(fields).encode())
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # the site is local
    try:
        with opener.open(request, timeout=10) as response:
            text = response.read().decode()
    except urllib.error.HTTPError as exc:
        fail(exc.read().decode().strip() or str(exc))
    except (urllib.error.URLError, OSError) as exc:
        fail(f"no demo site at {url} ({exc}): start it with crawlfleet demo-site --port {port}")
    typer.echo(text, nl=False)


def role_addresses(pairs: list[str]) -> dict[str, str]:
    """Every role's address, ``["shop=10.0.0.4"]`` moving one; ``ValueError`` if bad.

    Pages link across roles, so every role is served, the others on their loopback address.
    """
    from crawlfleet.demosite.roles import DEFAULT_ADDRESSES, ROLES

    addresses = dict(DEFAULT_ADDRESSES)
    moved: set[str] = set()
    for pair in pairs:
        role, sep, ip = pair.partition("=")
        try:
            ipaddress.ip_address(ip.strip())
        except ValueError:
            raise ValueError(f"--address {pair!r}: write ROLE=IP (shop=127.0.0.2)") from None
        role = role.strip()
        if not sep or role in moved:
            raise ValueError(f"--address {pair!r}: write each role once, as ROLE=IP")
        if role not in addresses:
            raise ValueError(f"--address {pair!r}: unknown role; roles: {', '.join(ROLES)}")
        moved.add(role)
        addresses[role] = ip.strip()
    return addresses


async def _serve(site: DemoSite, console: Console) -> None:
    await site.start()
    try:
        table = Table(title="crawlfleet demo site")
        table.add_column("role")
        table.add_column("url")
        for role in site.addresses:
            table.add_row(safe(role), safe(site.url(role, "/")))
        console.print(table)
        console.print("Serving until Ctrl-C.")
        await asyncio.Event().wait()
    finally:
        await site.stop()
