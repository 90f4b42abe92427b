"""The live progress bar and the end-of-crawl summary table (rich)."""

from __future__ import annotations

from collections.abc import Mapping

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from crawlfleet.cli.console import safe
from crawlfleet.monitoring.attempt_log import DomainSummary
from crawlfleet.monitoring.stats import LiveStats


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


class CrawlProgress:
    """A rich progress bar fed from ``LiveStats``: pages done, queue, pages/s, errors, ETA."""

    def __init__(self, console: Console, stats: LiveStats, *, enabled: bool) -> None:
        self._stats = stats
        self._progress = Progress(
            TextColumn("[bold]crawl"),
            BarColumn(),
            TextColumn("{task.fields[line]}"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
            disable=not enabled,
        )
        self._task: TaskID = self._progress.add_task("crawl", total=None, line="starting")

    def __enter__(self) -> CrawlProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def refresh(self, now: float) -> None:
        s = self._stats
        counts = s.counts
        total = counts.done + counts.dead + counts.pending
        line = (
            f"{counts.done + counts.dead}/{total} done · queue {counts.queued} · "
            f"{s.rate(now):.1f} pages/s · {s.errors} errors · ETA {_eta(s.eta_s(now))}"
        )
        self._progress.update(
            self._task, completed=counts.done + counts.dead, total=max(total, 1), line=line
        )


def summary_table(summary: Mapping[str, DomainSummary]) -> Table:
    """Per domain: pages, status codes, bytes, mean latency, retries, dead-lettered."""
    table = Table(title="crawl summary")
    for column in ("domain", "pages", "statuses", "bytes", "mean latency", "retries", "dead"):
        table.add_column(column, justify="left" if column in ("domain", "statuses") else "right")
    for domain in sorted(summary):
        d = summary[domain]
        statuses = " ".join(f"{code}:{n}" for code, n in sorted(d.statuses.items()))
        table.add_row(
            safe(domain),
            str(d.pages),
            statuses,
            f"{d.bytes:,}",
            f"{d.mean_latency_s * 1000:.0f} ms",
            str(d.retries),
            str(d.dead),
        )
    return table
