"""The live progress (a rich bar on a terminal, a log line otherwise) and the end-of-crawl summary.

Both read the store's statistics (``monitoring.stats.Sample``, ``monitoring.summary.CrawlResult``),
so the embedded and the distributed crawl show the same figures.
"""

from __future__ import annotations

from rich.console import Console, Group
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from crawlfleet.cli.console import safe
from crawlfleet.counters import CrawlStats
from crawlfleet.monitoring.quality_scores import quality_report
from crawlfleet.monitoring.stats import Sample
from crawlfleet.monitoring.summary import CrawlResult
from crawlfleet.records import Outcome

LOG_EVERY_S = 10.0


def eta_text(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def progress_line(sample: Sample) -> str:
    """``[paused · ]done/total done · queue Q · R pages/s · E errors · ETA [(bottleneck: D)]
    [· S sitemaps read]``.

    The ETA is politeness-aware (``monitoring.eta``); the bottleneck is named when a
    domain's pace, not the fleet's rate, sets it.
    """
    counts = sample.counts
    total = sample.finished + counts.pending
    eta = sample.eta
    line = (
        f"{sample.finished}/{total} done · queue {counts.queued} · {sample.rate:.1f} pages/s · "
        f"{sample.stats.errors} errors · ETA {eta_text(eta.eta_s)}"
    )
    if eta.bottleneck is not None:
        line += f" (bottleneck: {eta.bottleneck})"
    sitemaps = sample.stats.get("sitemaps.read")
    if sitemaps:
        line += f" · {sitemaps} sitemaps read"
    return f"paused · {line}" if sample.paused else line


class CrawlProgress:
    """Shows samples: a progress bar on a terminal, else a log line every ``log_every_s``."""

    def __init__(self, console: Console, *, tty: bool, log_every_s: float = LOG_EVERY_S) -> None:
        self._console = console
        self._tty = tty
        self._log_every_s = log_every_s
        self._last_log_at: float | None = None
        self._progress = Progress(
            TextColumn("[bold]crawl"),
            BarColumn(),
            TextColumn("{task.fields[line]}"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
            disable=not tty,
        )
        self._task: TaskID = self._progress.add_task("crawl", total=None, line="starting")

    def __enter__(self) -> CrawlProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def update(self, sample: Sample) -> None:
        line = progress_line(sample)
        if self._tty:
            total = sample.finished + sample.counts.pending
            self._progress.update(
                self._task, completed=sample.finished, total=max(total, 1), line=safe(line)
            )
            return
        if self._last_log_at is None or sample.at - self._last_log_at >= self._log_every_s:
            self._last_log_at = sample.at
            self._console.print(f"progress: {line}", highlight=False, markup=False)


def _row(name: str, s: CrawlStats) -> list[str]:
    statuses = " ".join(f"{cls}:{n}" for cls, n in sorted(s.statuses().items()))
    return [
        safe(name),
        str(s.pages),
        statuses,
        f"{s.get('bytes'):,}",
        f"{s.mean_latency_s * 1000:.0f} ms",
        str(s.get(f"outcome.{Outcome.RETRY.value}")),
        str(s.get(f"outcome.{Outcome.DEAD.value}")),
        str(s.get(f"outcome.{Outcome.SKIPPED.value}")),
        str(s.get(f"outcome.{Outcome.PARSE_ERROR.value}")),
        str(sum(s.dropped().values())),
    ]


def summary_table(result: CrawlResult) -> Table:
    """Per domain, then in total: pages, status classes, bytes, latency, retries, dead, ...,
    and what limits dropped (links, redirects, sitemaps: ``crawl.py`` ends with the detail).

    The figures are the crawl's totals (of every run, when it was resumed); the title says so.
    """
    resumed = result.run.counters != result.stats.counters
    table = Table(title="crawl summary (totals of all runs)" if resumed else "crawl summary")
    columns = ("domain", "pages", "statuses", "bytes", "mean latency", "retries", "dead")
    for column in (*columns, "skipped", "parse errors", "dropped"):
        table.add_column(column, justify="left" if column in ("domain", "statuses") else "right")
    for domain in sorted(result.domains):
        table.add_row(*_row(domain, result.domains[domain]))
    table.add_section()
    table.add_row(*_row("total", result.stats))
    return table


def items_table(result: CrawlResult) -> Table | None:
    """Items stored, invalid (kept as rejects) and dropped as duplicates, per type."""
    kinds = {kind: result.stats.items(kind) for kind in ("stored", "invalid", "duplicate")}
    types = sorted({t for counts in kinds.values() for t in counts})
    if not types:
        return None
    table = Table(title="items")
    for column in ("type", "stored", "invalid", "duplicate"):
        table.add_column(column, justify="left" if column == "type" else "right")
    for item_type in types:
        table.add_row(safe(item_type), *(str(kinds[k].get(item_type, 0)) for k in kinds))
    return table


def quality_table(result: CrawlResult) -> Table | None:
    """Per parser with expectations, in total and per domain: pages, share that met them,
    items per page and each expected field's fill rate (``monitoring/quality_scores.py``)."""
    parsers = quality_report(result.stats, result.domains)["parsers"]
    if not parsers:
        return None
    table = Table(title="data quality")
    for column in ("parser", "domain", "pages", "met", "items/page", "fill rates"):
        table.add_column(column, justify="left" if column in ("parser", "domain") else "right")
    for parser, score in parsers.items():
        for domain, figures in (("total", score), *score["domains"].items()):
            rates = " ".join(f"{f}:{r:.0%}" for f, r in figures["fill_rates"].items())
            table.add_row(
                safe(parser),
                safe(domain),
                str(figures["pages"]),
                f"{figures['met_share']:.0%}",
                f"{figures['items_per_page']:.1f}",
                safe(rates),
            )
    return table


def _stored(stats: CrawlStats) -> int:
    return sum(stats.items("stored").values())


def summary(result: CrawlResult) -> Group:
    """The summary tables, the top parse errors and the fetch totals, for printing."""
    parts: list[Table | Text] = [summary_table(result)]
    items = items_table(result)
    if items is not None:
        parts.append(items)
    quality = quality_table(result)
    if quality is not None:
        parts.append(quality)
    mismatched = result.stats.get(f"outcome.{Outcome.MISMATCH.value}")
    if mismatched:
        parts.append(
            Text(
                f"{mismatched} parses missed their parser's expectations (outcome mismatch); "
                "pages: crawlfleet dlq classes, samples in <state>/mismatch/"
            )
        )
    if result.top_reject_reasons:
        invalid = sum(result.stats.items("invalid").values())
        parts.append(
            Text(f"{invalid} items invalid (kept as rejects; crawlfleet rejects lists them):")
        )
        parts.extend(
            Text(f"  {count}x {item_type}: {reason}")
            for reason, item_type, count in result.top_reject_reasons
        )
    if result.top_parse_errors:
        parts.append(Text(f"{result.parse_errors} pages failed to parse; most frequent errors:"))
        parts.extend(Text(f"  {count}x {error}") for error, count in result.top_parse_errors)
    s, run = result.stats, result.run
    rate = run.fetched / result.elapsed_s if result.elapsed_s > 0 else 0.0
    parts.append(
        Text(
            f"this run: fetched {run.fetched} responses ({run.pages} pages ok) in "
            f"{result.elapsed_s:.1f} s, {rate:.1f} responses/s"
        )
    )
    if run.counters != s.counters:
        parts.append(
            Text(
                f"crawl totals (all runs): fetched {s.fetched} responses ({s.pages} pages ok), "
                f"{_stored(s)} items stored"
            )
        )
    sitemaps = run.get("sitemaps.read")
    if sitemaps:
        parts.append(
            Text(
                f"sitemaps: {sitemaps} read (among the pages ok), {run.get('sitemaps.entries')}"
                f" page URLs listed, {run.get('sitemaps.queued')} child sitemaps queued,"
                f" {run.get('sitemaps.over_limits')} left by limits,"
                f" {run.get('sitemaps.skipped')} skipped"
            )
        )
    unchanged, changed = run.get("fresh.unchanged"), run.get("fresh.changed")
    if unchanged or changed:
        parts.append(
            Text(
                f"revisits: {unchanged} unchanged ({run.get('fresh.not_modified')} answered 304),"
                f" {changed} changed"
            )
        )
    return Group(*parts)
