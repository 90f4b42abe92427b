"""``crawlfleet shell URL|FILE``: a Python console on one page, to write and debug parsers.

The console (IPython when it is installed and stdin is a terminal, else the standard one)
starts with ``response`` (a ``parsing.Response``: ``css``, ``xpath``, ``text``, ``links``)
and these helpers:

- ``fetch(url)`` fetches another page (or reads a saved one) and makes it ``response``;
- ``parse()`` runs the parser the crawl would pick for ``response`` and prints its items
  and links as JSON (returns the ``ParseResult``);
- ``view()`` writes the page to a temporary ``.html`` file and prints its path.
"""

from __future__ import annotations

import asyncio
import code
import json
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from crawlfleet.cli.console import fail, make_console, safe
from crawlfleet.cli.parsers import (
    ConfigOpt,
    ParsersOpt,
    PrivateOpt,
    as_json,
    crawl_settings,
    fetching,
    saved_page,
)
from crawlfleet.errors import CrawlfleetError
from crawlfleet.models import FetchResult, ParseResult
from crawlfleet.parsing.loader import load_parsers
from crawlfleet.parsing.registry import ParserRegistry
from crawlfleet.parsing.response import Response
from crawlfleet.settings import Settings

BANNER = """crawlfleet shell: {url} (HTTP {status}, parser {parser!r})
  response      the page: response.css("h1"), response.xpath(...), response.text
  fetch(url)    fetch another page (or a saved file) into response
  parse()       run the matching parser on response; prints items and links
  view()        write the page to a temporary file and print its path"""


class Session:
    """The console's state: the current page and how to get and parse others."""

    def __init__(self, settings: Settings, registry: ParserRegistry) -> None:
        self.settings = settings
        self.registry = registry
        self.response: Response | None = None
        self.namespace: dict[str, Any] = {}

    def load(self, target: str) -> Response:
        """``target`` (a URL, or a saved page's path) as the current ``response``."""
        path = Path(target)
        result = saved_page(path, None) if path.is_file() else asyncio.run(self._get(target))
        self.response = Response(result)
        self.namespace["response"] = self.response
        return self.response

    async def _get(self, url: str) -> FetchResult:
        async with fetching(self.settings) as fetch:
            return await fetch(url)

    def fetch(self, url: str) -> Response:
        response = self.load(url)
        print(f"HTTP {response.status} {response.final_url} ({len(response.body)} bytes)")
        return response

    def parse(self) -> ParseResult:
        response = self._current()
        name, parser = self.registry.select(response.final_url)
        parsed = parser(response.result)
        print(json.dumps(as_json(name, response.result, parsed), indent=2, ensure_ascii=False))
        print(f"{name}: {len(parsed.items)} items, {len(parsed.links)} links")
        return parsed

    def view(self) -> Path:
        response = self._current()
        with tempfile.NamedTemporaryFile(
            "wb", prefix="crawlfleet-", suffix=".html", delete=False
        ) as handle:
            handle.write(response.body)
        path = Path(handle.name)
        print(path)
        return path

    def _current(self) -> Response:
        if self.response is None:
            raise RuntimeError("no page yet: fetch(url) first")
        return self.response

    def banner(self) -> str:
        response = self._current()
        parser, _ = self.registry.select(response.final_url)
        return BANNER.format(url=response.final_url, status=response.status, parser=parser)


def interact(namespace: dict[str, Any], banner: str) -> None:
    """IPython when installed and stdin is a terminal (it reads a pipe badly), else ``code``."""
    if sys.stdin.isatty():
        try:
            from IPython import start_ipython
        except ImportError:
            pass
        else:
            print(banner)
            start_ipython(argv=[], user_ns=namespace)
            return
    code.interact(banner=banner, local=namespace, exitmsg="")


def shell(
    target: Annotated[str, typer.Argument(help="a URL to fetch, or a saved page")],
    parsers: ParsersOpt = None,
    config: ConfigOpt = None,
    allow_private_addresses: PrivateOpt = False,
) -> None:
    """Open a Python console on one page, with fetch(), parse() and view()."""
    err = make_console(stderr=True)
    try:
        settings = crawl_settings(config, parsers, allow_private_addresses)
        session = Session(settings, load_parsers(settings.parsers, settings.selector_parsers))
        session.load(target)
    except (CrawlfleetError, OSError) as exc:
        fail(exc, err)
    session.namespace.update(
        fetch=session.fetch, parse=session.parse, view=session.view, settings=settings
    )
    err.print(safe(f"{len(session.registry)} parsers loaded"))
    interact(session.namespace, session.banner())


def register(app: typer.Typer) -> None:
    app.command("shell")(shell)
