"""``crawlfleet reparse --archive DIR --parsers FILE.py -o OUT``: a crawl's parsers run again
over its archived pages, without a request to any site.

The items go through the crawl's pipeline into an items file (``--state DIR``'s, or a
temporary one), or into a distributed crawl's PostgreSQL (``--postgres DSN --crawl-id ID``;
with ``--redis URL`` the workers do it, one Celery task per WARC file: ``reparse_jobs.py``),
and are exported to ``OUT`` as ``crawlfleet export`` writes them (JSONL: one
``{"type", "key", ...}`` object a line).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from crawlfleet.archive.exports import export_to, is_object_url
from crawlfleet.archive.protocols import Archived
from crawlfleet.cli.console import fail, safe
from crawlfleet.errors import ConfigError, CrawlfleetError, StateError
from crawlfleet.pipeline.export import ITEMS_FILE, export_items, export_postgres
from crawlfleet.runtime.backends import extra_missing
from crawlfleet.runtime.reparse import ReparseFigures, reparse, reparse_to_postgres
from crawlfleet.settings import Settings
from crawlfleet.settings.loading import load_settings

err = Console(stderr=True)
DEFAULT_JOBS = (
    len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
)
"""Parse processes of a reparse: one a CPU this process may run on (decision 0049)."""


def _records(source: str) -> Iterator[Archived]:
    from crawlfleet.archive.reading import archive_records  # fastwarc: the archive extra

    return archive_records(source)


async def _run(settings: Settings, root: str, items_file: Path, jobs: int) -> ReparseFigures:
    from crawlfleet.pipeline.sinks.sqlite import SqliteSink

    sink = await SqliteSink.open(items_file, crawl_id=settings.crawl_id)
    sink.write_in_turns()  # one transaction an event-loop turn, as in a crawl (decision 0027)
    try:
        return await reparse(settings, _records(root), sink, sink, jobs=jobs)
    finally:
        await sink.close()


async def _run_postgres(settings: Settings, root: str, dsn: str, jobs: int) -> ReparseFigures:
    """Into a distributed crawl's items (PostgreSQL, the crawl id's rows), as its workers write."""
    from crawlfleet.pipeline.sinks.postgres_schema import migrate

    await asyncio.to_thread(migrate, dsn)
    return await reparse_to_postgres(settings, _records(root), dsn, jobs=jobs)


def _embedded(
    settings: Settings, archive: str, output: Path | str, state: Path | None, jobs: int
) -> tuple[ReparseFigures, int]:
    """Into an items file (``state``'s, or a temporary one), exported to ``output``."""
    with contextlib.ExitStack() as stack:
        if state is None:
            where = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        else:
            where = state
            where.mkdir(parents=True, exist_ok=True)
        items_file = where / ITEMS_FILE
        if state is None and Path(output).resolve() == items_file.resolve():
            raise ConfigError("give -o another file than the items file")
        figures = asyncio.run(_run(settings, archive, items_file, jobs))
        written = export_to(output, partial(export_items, items_file, crawl_id=settings.crawl_id))
        return figures, written


def _distributed(
    settings: Settings, archive: str, redis: str, broker: str, dsn: str
) -> ReparseFigures:
    """One task per WARC file to the workers, into the crawl's PostgreSQL; the summed figures.

    ``StateError`` naming the files whose task failed (their error), after the totals.
    """
    try:
        from crawlfleet.pipeline.sinks.postgres_schema import migrate
        from crawlfleet.runtime.celery.reparse_jobs import fan_out
    except ImportError as exc:
        raise extra_missing(exc) from None

    def progress(done: int, files: int) -> None:
        err.print(f"reparse: {done} of {files} WARC files done", soft_wrap=True)

    migrate(dsn)
    if not is_object_url(archive):
        archive = str(Path(archive).resolve())  # the workers' view of a directory they share
    outcome = asyncio.run(
        fan_out(settings, archive, redis_url=redis, broker_url=broker, on_progress=progress)
    )
    if outcome.failed:
        _report(outcome.figures)
        name, error = next(iter(outcome.failed.items()))
        raise StateError(
            f"{len(outcome.failed)} of {outcome.files} WARC files not reparsed; {name}: {error}"
        )
    err.print(f"reparse: {outcome.files} WARC files, one task each", soft_wrap=True)
    return outcome.figures


def reparse_command(
    archive: Annotated[
        str,
        typer.Option(
            "--archive", help="directory of the WARC files (and subfolders), or s3://bucket/prefix"
        ),
    ],
    output: Annotated[
        str, typer.Option("-o", "--output", help="items file to write, or s3://bucket/prefix/NAME")
    ],
    parsers: Annotated[
        str | None, typer.Option(help="parser modules or .py files, comma-separated")
    ] = None,
    config: Annotated[Path | None, typer.Option("--config", help="TOML settings file")] = None,
    state: Annotated[
        Path | None,
        typer.Option("--state", help="keep the items in this directory's items file too"),
    ] = None,
    postgres: Annotated[
        str | None,
        typer.Option("--postgres", help="write the items into a distributed crawl's PostgreSQL"),
    ] = None,
    crawl_id: Annotated[
        str | None, typer.Option("--crawl-id", help="the crawl whose items these are")
    ] = None,
    redis: Annotated[
        str | None,
        typer.Option(
            "--redis",
            help="fan out one task per WARC file to the workers (with --postgres, --crawl-id)",
        ),
    ] = None,
    broker: Annotated[
        str | None, typer.Option("--broker", help="Celery broker URL (default: the Redis URL)")
    ] = None,
    jobs: Annotated[
        int,
        typer.Option(
            "--jobs",
            min=1,
            help="processes running the parsers (default: one a CPU); with --redis each"
            " worker parses its files itself",
        ),
    ] = DEFAULT_JOBS,
    wait_for_workers: Annotated[
        bool | None,
        typer.Option(
            "--wait-for-workers",
            help="with --redis: wait for ever for a worker that takes the tasks (else: stop"
            " after worker_wait_s, 60 s, with exit 2 and the reason)",
        ),
    ] = None,
) -> None:
    """Parse the archived pages again, as if just fetched; no request is made."""
    target = output if is_object_url(output) else Path(output)
    try:
        settings = load_settings(
            config, crawl_id=crawl_id, worker_wait_s=0.0 if wait_for_workers else None
        )
        if parsers:
            settings.parsers = [*settings.parsers, *(p.strip() for p in parsers.split(",") if p)]
        if postgres is not None and state is not None:
            raise ConfigError("give --state DIR or --postgres DSN, not both")
        if redis is not None and (postgres is None or crawl_id is None):
            raise ConfigError("--redis needs --postgres DSN and --crawl-id ID")
        if postgres is not None:
            if redis is not None:
                figures = _distributed(settings, archive, redis, broker or redis, postgres)
            else:
                figures = asyncio.run(_run_postgres(settings, archive, postgres, jobs))
            written = export_to(
                target, partial(export_postgres, postgres, crawl_id=settings.crawl_id)
            )
        else:
            figures, written = _embedded(settings, archive, target, state, jobs)
    except (CrawlfleetError, OSError) as exc:
        fail(exc, err)
    _report(figures)
    err.print(f"wrote {written} items to {safe(str(output))}", soft_wrap=True)


def _report(figures: ReparseFigures) -> None:
    rate = figures.pages / figures.elapsed_s if figures.elapsed_s > 0 else 0.0
    cpu_ms = figures.cpu_s * 1000 / figures.pages if figures.pages else 0.0
    skipped = ", ".join(f"{n} {why}" for why, n in sorted(figures.skipped.items())) or "none"
    err.print(
        f"reparsed {figures.pages} pages of {figures.records} records in "
        f"{figures.elapsed_s:.1f} s ({rate:.0f} pages/s, {cpu_ms:.2f} CPU ms a page)"
        + (
            f" after {figures.startup_s:.1f} s starting parse processes"
            if figures.startup_s
            else ""
        )
        + ", no request made; "
        f"items: {figures.items['stored']} stored, {figures.items['invalid']} invalid, "
        f"{figures.items['dropped']} dropped; {figures.links} links found (not crawled); "
        f"not parsed: {skipped}",
        soft_wrap=True,
    )
    if figures.first_error:
        err.print(f"first error: {safe(figures.first_error)}", soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.command("reparse")(reparse_command)
