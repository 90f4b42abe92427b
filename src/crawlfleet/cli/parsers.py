"""``crawlfleet parse | new-parser | check``: try, scaffold and check site parsers."""

from __future__ import annotations

import asyncio
import json
import mimetypes
import re
import time
import traceback
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

import typer
from rich.console import Console
from rich.table import Table

from crawlfleet.cli.console import fail, make_console, safe
from crawlfleet.errors import CrawlfleetError, ForbiddenAddress
from crawlfleet.fetchers.credentials import Credentials
from crawlfleet.fetchers.files import FileFetcher
from crawlfleet.fetchers.http import HttpFetcher
from crawlfleet.models import CrawlRequest, FetchResult, ParseResult
from crawlfleet.parsing.contracts import Fetch, check_contracts
from crawlfleet.parsing.loader import load_parsers
from crawlfleet.parsing.registry import ParserRegistry
from crawlfleet.runtime.options import fetch_options
from crawlfleet.settings import Settings
from crawlfleet.settings.loading import load_settings
from crawlfleet.urls import UrlRules, fingerprint

ParsersOpt = Annotated[
    str | None, typer.Option("--parsers", help="parser modules or .py files, comma-separated")
]
ConfigOpt = Annotated[
    Path | None, typer.Option("--config", help="crawl config (TOML): parsers, selector_parsers")
]
PrivateOpt = Annotated[
    bool, typer.Option("--allow-private-addresses", help="fetch loopback/private hosts")
]


def register(app: typer.Typer) -> None:
    """Add the parser commands to ``app``."""
    app.command("parse")(parse)
    app.command("new-parser")(new_parser)
    app.command("check")(check)


def crawl_settings(config: Path | None, parsers: str | None, allow_private: bool) -> Settings:
    """The settings of ``config`` with the ``--parsers`` modules added."""
    settings = load_settings(config, allow_private_addresses=allow_private or None)
    extra = [source.strip() for source in (parsers or "").split(",") if source.strip()]
    settings.parsers = [*settings.parsers, *extra]
    return settings


@asynccontextmanager
async def fetching(settings: Settings) -> AsyncIterator[Fetch]:
    """A URL -> FetchResult function over the project's fetchers (``file:`` and http(s)).

    A URL's userinfo is sent as Basic auth to its origin, as for a crawl's seeds.
    """
    rules = UrlRules(settings.strip_query_params, settings.politeness_key)
    credentials = Credentials()
    options = fetch_options(settings)
    http, files = HttpFetcher(options, credentials=credentials), FileFetcher(options)

    async def fetch(url: str) -> FetchResult:
        credentials.add_from_url(url)
        target = rules.target(url)
        request = CrawlRequest(
            target.url, fingerprint(target.key), rules.politeness_key(target.url)
        )
        fetcher = files if target.url.startswith("file:") else http
        return await fetcher.fetch(request)

    try:
        yield fetch
    finally:
        await http.close()
        await files.close()


def saved_page(path: Path, url: str | None) -> FetchResult:
    """A saved file as a response from ``url`` (default: its ``file:`` URL)."""
    page_url = url or path.resolve().as_uri()
    content_type = mimetypes.guess_type(path.name)[0] or ""
    return FetchResult(
        url=page_url,
        final_url=page_url,
        status=200,
        headers={"content-type": content_type} if content_type else {},
        body=path.read_bytes(),
        elapsed_s=0.0,
        fetcher="file",
        fetched_at=time.time(),
    )


async def _fetch_one(settings: Settings, url: str) -> FetchResult:
    async with fetching(settings) as fetch:
        return await fetch(url)


def as_json(name: str, response: FetchResult, parsed: ParseResult) -> dict[str, Any]:
    return {
        "parser": name,
        "url": response.url,
        "status": response.status,
        "items": [item.to_dict() for item in parsed.items],
        "links": [
            {"url": link.url, "priority": link.priority, "fetcher": link.fetcher}
            for link in parsed.links
        ],
    }


def parse(
    target: Annotated[str, typer.Argument(help="a URL to fetch, or a saved page")],
    parser: Annotated[str | None, typer.Option("--parser", help="parser name to use")] = None,
    parsers: ParsersOpt = None,
    config: ConfigOpt = None,
    url: Annotated[str | None, typer.Option("--url", help="the URL a saved page came from")] = None,
    save: Annotated[Path | None, typer.Option("--save", help="also write the body here")] = None,
    allow_private_addresses: PrivateOpt = False,
) -> None:
    """Run a parser on one page and print its items and links as JSON."""
    err = make_console(stderr=True)
    try:
        settings = crawl_settings(config, parsers, allow_private_addresses)
        registry = load_parsers(settings.parsers, settings.selector_parsers)
        path = Path(target)
        if path.is_file():
            response = saved_page(path, url)
        else:
            response = asyncio.run(_fetch_one(settings, target))
        if save is not None:
            save.write_bytes(response.body)
        name, chosen = (
            registry.get(parser) if parser else registry.select(url or response.final_url)
        )
    except (CrawlfleetError, OSError) as exc:
        fail(exc, err)
    try:
        parsed = chosen(response)
    except Exception:
        err.print(f"[red]parser {safe(repr(name))} raised:[/]\n{safe(traceback.format_exc())}")
        raise typer.Exit(1) from None
    typer.echo(
        json.dumps(as_json(name, response, parsed), indent=2, ensure_ascii=False, default=str)
    )
    err.print(
        f"{safe(name)}: {len(parsed.items)} items, {len(parsed.links)} links "
        f"(HTTP {response.status})"
    )


async def _check(settings: Settings, registry: ParserRegistry) -> bool:
    async with fetching(settings) as fetch:
        reports = await check_contracts(registry, fetch)
    console = make_console(stderr=True)
    if not reports:
        console.print("no parser declares a sample_url: nothing to check")
        return True
    table = Table("parser", "sample URL", "items", "links", "result")
    for report in reports:
        result = "[green]ok[/]" if report.ok else f"[red]{safe('; '.join(report.problems))}[/]"
        table.add_row(
            safe(report.parser), safe(report.url), str(report.items), str(report.links), result
        )
    console.print(table)
    return all(report.ok for report in reports)


def check(
    parsers: ParsersOpt = None,
    config: ConfigOpt = None,
    allow_private_addresses: PrivateOpt = False,
) -> None:
    """Run every parser on its sample_url and check its contract; exit 1 if one fails."""
    err = make_console(stderr=True)
    try:
        settings = crawl_settings(config, parsers, allow_private_addresses)
        registry = load_parsers(settings.parsers, settings.selector_parsers)
        passed = asyncio.run(_check(settings, registry))
    except (CrawlfleetError, OSError) as exc:
        fail(exc, err)
    if not passed:
        raise typer.Exit(1)


def module_name(domain: str) -> str:
    """``books.toscrape.com`` -> ``books_toscrape_com`` (a valid module name)."""
    name = re.sub(r"\W+", "_", domain.lower()).strip("_")
    return f"site_{name}" if not name or name[0].isdigit() else name


def new_parser(
    target: Annotated[
        str, typer.Argument(help="the sample page's URL, or the site's domain (its / page)")
    ],
    directory: Annotated[Path, typer.Option("--dir", help="where to write the files")] = Path(),
    config: ConfigOpt = None,
    allow_private_addresses: PrivateOpt = False,
    offline: Annotated[
        bool, typer.Option("--offline", help="save a placeholder page instead of fetching")
    ] = False,
) -> None:
    """Write a parser module for a site, its sample page (fetched) and a test that runs it offline."""
    err = make_console(stderr=True)
    url = target.strip() if "://" in target else f"https://{target.strip().strip('.')}/"
    domain = (urlsplit(url).hostname or "").lower()
    if not domain:
        fail(f"no host in {target!r}: give a URL or a domain", err)
    module = module_name(domain)
    parser_path = directory / f"{module}.py"
    test_path = directory / f"test_{module}.py"
    page_path = directory / "pages" / f"{module}.html"
    existing = [str(path) for path in (parser_path, test_path, page_path) if path.exists()]
    if existing:
        err.print(f"[red]error:[/] not overwriting {safe(', '.join(existing))}")
        raise typer.Exit(1)
    values = {"domain": domain, "domain_re": re.escape(domain), "module": module, "url": url}
    if offline:
        body = PAGE_TEMPLATE.format(**values).encode()
    else:
        body = _sample_page(url, config, allow_private_addresses, err)
    page_path.parent.mkdir(parents=True, exist_ok=True)
    page_path.write_bytes(body)
    parser_path.write_text(PARSER_TEMPLATE.format(**values))
    title, links = _expected(parser_path, module, url, body)
    test_path.write_text(TEST_TEMPLATE.format(**values, title=title, links=links))
    source = "a placeholder page (--offline)" if offline else f"the page fetched from {url}"
    err.print(
        safe(
            f"wrote {parser_path}, {test_path}, {page_path} ({source})\n"
            f"try it: crawlfleet parse {url} --parsers {parser_path}"
        )
    )


def _sample_page(url: str, config: Path | None, allow_private: bool, err: Console) -> bytes:
    """The body of ``url``, fetched as a crawl fetches; one error line if it cannot be."""
    try:
        settings = crawl_settings(config, None, allow_private)
        response = asyncio.run(_fetch_one(settings, url))
    except ForbiddenAddress as exc:
        fail(f"{exc} (add --allow-private-addresses to fetch it)", err)
    except (CrawlfleetError, OSError) as exc:
        fail(exc, err)
    if response.status != 200 or not response.body:
        fail(
            f"{url} answered HTTP {response.status} with {len(response.body)} bytes: "
            "name a page that answers 200, or use --offline for a placeholder",
            err,
        )
    return response.body


def _expected(parser_path: Path, module: str, url: str, body: bytes) -> tuple[str, int]:
    """The title and link count the new parser gives on the saved page, for its test."""
    registry = load_parsers([str(parser_path)], use_entry_points=False)
    _, parse_page = registry.get(module)
    page = FetchResult(
        url=url,
        final_url=url,
        status=200,
        headers={"content-type": "text/html"},
        body=body,
        elapsed_s=0.0,
    )
    result = parse_page(page)
    title = result.items[0].data.get("title") if result.items else None
    return (title if isinstance(title, str) else ""), len(result.links)


PARSER_TEMPLATE = '''"""The {domain} parser: edit the selectors to match the site."""

from collections.abc import Iterator
from typing import Any

from crawlfleet.parsing import Contract, Follow, Response, parser


@parser(
    "{domain}",
    name="{module}",
    item_type="{module}",
    # Links on the page matching a rule are followed (first matching rule wins); others are not.
    follow=[Follow(pattern=r"^https?://([^/]+\\.)?{domain_re}(:\\d+)?/")],
    sample_url="{url}",
    contract=Contract(min_items=1, required_fields=["title"]),
)
def parse(response: Response) -> Iterator[Any]:
    """One item per page; yield dicts (items), Items, or URLs to follow."""
    title = response.css_first("h1") or response.css_first("title")
    yield {{
        "key": response.url,
        "url": response.url,
        "title": title.text(strip=True) if title else None,
    }}
'''

TEST_TEMPLATE = '''"""The {domain} parser on a saved page, offline.

Save a newer page with: crawlfleet parse {url} --save pages/{module}.html
"""

from pathlib import Path

from crawlfleet.models import FetchResult
from crawlfleet.parsing import load_parsers

HERE = Path(__file__).parent
URL = "{url}"


def test_parser_on_saved_page() -> None:
    registry = load_parsers([str(HERE / "{module}.py")], use_entry_points=False)
    name, parse = registry.select(URL)
    response = FetchResult(
        url=URL,
        final_url=URL,
        status=200,
        headers={{"content-type": "text/html"}},
        body=(HERE / "pages" / "{module}.html").read_bytes(),
        elapsed_s=0.0,
    )
    result = parse(response)
    assert name == "{module}"
    assert [item.data["title"] for item in result.items] == [{title!r}]
    assert len(result.links) == {links}
'''

PAGE_TEMPLATE = """<!doctype html>
<html><head><title>{domain}</title></head>
<body><h1>Welcome to {domain}</h1>
<a href="/about">About</a> <a href="https://elsewhere.example/">Elsewhere</a>
</body></html>
"""
