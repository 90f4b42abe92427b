"""``crawlfleet archive list|get|cdxj``: the captures a crawl archived (``--archive``).

Each reads the crawl's capture index (embedded: ``archive.sqlite`` in ``--state DIR``;
distributed: PostgreSQL, ``--postgres DSN --crawl-id ID``) and finds a capture without
scanning the WARC files.
"""

from __future__ import annotations

import datetime as dt
import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from crawlfleet.cli.console import fail, safe
from crawlfleet.errors import CrawlfleetError, StateError
from crawlfleet.fetchers.decoding import decode_body
from crawlfleet.ops.results import capture_index
from crawlfleet.settings import Settings

archive_app = typer.Typer(help="Find the pages a crawl archived (--archive).", no_args_is_help=True)
out = Console()
err = Console(stderr=True)

StateOpt = Annotated[
    Path,
    typer.Option("--state", help="state directory of an embedded crawl"),
]
DEFAULT_STATE = Path(".crawlfleet")


PostgresOpt = Annotated[
    str | None, typer.Option("--postgres", help="PostgreSQL DSN of a distributed crawl")
]
CrawlIdOpt = Annotated[str, typer.Option("--crawl-id", help="the distributed crawl")]


def _when(epoch_s: float) -> str:
    return dt.datetime.fromtimestamp(epoch_s, dt.UTC).isoformat(timespec="seconds")


@archive_app.command("list")
def list_(
    url: Annotated[str | None, typer.Argument(help="only the captures of this URL")] = None,
    state: StateOpt = DEFAULT_STATE,
    postgres: PostgresOpt = None,
    crawl_id: CrawlIdOpt = "default",
    limit: Annotated[int, typer.Option(min=1, help="rows at most")] = 1000,
) -> None:
    """The captures of URL (or of every URL), oldest first."""
    try:
        index = capture_index(postgres_dsn=postgres, state_dir=state, crawl_id=crawl_id)
        captures = index.find(url, limit=limit)
        index.close()
    except (CrawlfleetError, OSError) as exc:
        fail(exc, err)
    table = Table("time", "status", "kind", "digest", "file", "offset", "length", "url")
    for c in captures:
        table.add_row(
            _when(c.at),
            str(c.status),
            c.kind,
            c.digest,
            c.file,
            str(c.offset),
            str(c.length),
            c.url,
        )
    out.print(table, soft_wrap=True)
    err.print(
        f"{len(captures)} capture(s)" + (f" (at most {limit})" if len(captures) == limit else "")
    )


@archive_app.command("get")
def get(
    url: Annotated[str, typer.Argument(help="the URL of a capture")],
    state: StateOpt = DEFAULT_STATE,
    postgres: PostgresOpt = None,
    crawl_id: CrawlIdOpt = "default",
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="file to write (default: stdout)")
    ] = None,
    raw: Annotated[
        bool, typer.Option("--raw", help="the body as sent (content codings not undone)")
    ] = False,
) -> None:
    """The body of URL's newest capture (its status and place on stderr)."""
    from crawlfleet.archive.reading import DAMAGED, read_capture  # fastwarc: the extra

    try:
        index = capture_index(postgres_dsn=postgres, state_dir=state, crawl_id=crawl_id)
        capture, root = index.latest(url), index.root
        index.close()
        if capture is None or root is None:
            raise StateError(f"no capture of {url} in the archive index")
        archived = read_capture(root, capture)
        if archived.kind == DAMAGED:
            raise StateError(f"the capture of {url} in {capture.file} is damaged (cut short)")
        body = archived.body
        coding = archived.headers.get("content-encoding")
        if coding and not raw:
            cap_bytes = Settings.model_fields["max_decompressed_bytes"].default
            body = decode_body(body, coding, cap_bytes=cap_bytes, url=url)
    except (CrawlfleetError, OSError) as exc:
        fail(exc, err)
    err.print(
        f"{archived.status} {safe(capture.mime)} fetched {_when(capture.at)} "
        f"({safe(capture.file)} at {capture.offset})",
        soft_wrap=True,
    )
    if output is None:
        sys.stdout.buffer.write(body)
        sys.stdout.buffer.flush()
    else:
        output.write_bytes(body)


@archive_app.command("cdxj")
def cdxj(
    state: StateOpt = DEFAULT_STATE,
    postgres: PostgresOpt = None,
    crawl_id: CrawlIdOpt = "default",
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="file to write (default: stdout)")
    ] = None,
) -> None:
    """Every capture as CDXJ lines (pywb's index format), sorted."""
    from crawlfleet.archive.cdxj import cdxj_lines

    try:
        index = capture_index(postgres_dsn=postgres, state_dir=state, crawl_id=crawl_id)
        lines = cdxj_lines(index.find())
        index.close()
    except (CrawlfleetError, OSError) as exc:
        fail(exc, err)
    text = "".join(f"{line}\n" for line in lines)
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text, encoding="utf-8")
    err.print(f"{len(lines)} capture(s)")


@archive_app.command("prune")
def prune_(
    older_than: Annotated[
        str, typer.Option("--older-than", help="age of the files to remove: 30d, 12h, 1w, ...")
    ],
    state: StateOpt = DEFAULT_STATE,
    postgres: PostgresOpt = None,
    crawl_id: CrawlIdOpt = "default",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="only list them")] = False,
) -> None:
    """Remove the archive's WARC files (directory or bucket) older than an age, and their
    captures from the index."""
    from crawlfleet.archive.retention import prune
    from crawlfleet.recrawl import duration_s

    try:
        age_s = duration_s(older_than)
        index = capture_index(postgres_dsn=postgres, state_dir=state, crawl_id=crawl_id)
        try:
            pruned = prune(index, time.time() - age_s, dry_run=dry_run)
        finally:
            index.close()
    except ValueError as exc:
        fail(f"--older-than {older_than!r}: {exc}", err)
    except (CrawlfleetError, OSError) as exc:
        fail(exc, err)
    for name in pruned.files:
        out.print(safe(name), soft_wrap=True)
    verb = "would remove" if dry_run else "removed"
    err.print(
        f"{verb} {len(pruned.files)} file(s), {pruned.size_bytes / 1e6:.1f} MB"
        + ("" if dry_run else f", {pruned.captures} capture(s) from the index")
    )


def register(app: typer.Typer) -> None:
    app.add_typer(archive_app, name="archive")
