"""The dashboard's HTML: plain server-rendered pages, every dynamic text escaped and redacted."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any
from urllib.parse import quote, urlencode

import orjson

from crawlfleet.counters import CrawlStats
from crawlfleet.dashboard.chart import progress_svg
from crawlfleet.dashboard.figures import DomainRow, duration
from crawlfleet.dashboard.sampler import CrawlHistory
from crawlfleet.monitoring.deadletters import ClassGroup
from crawlfleet.monitoring.quality_scores import scores
from crawlfleet.monitoring.samples import KeptSample
from crawlfleet.monitoring.summary import dropped_line
from crawlfleet.ops.protocols import ItemSample, WorkerRow
from crawlfleet.records import Attempt, AttemptFilter, Outcome
from crawlfleet.redact import redact

STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;background:#fafafa}
h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.6em}
table{border-collapse:collapse;background:#fff}td,th{padding:3px 8px;border:1px solid #ddd}
th{background:#eee;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}
.muted{color:#777}.bar{width:160px;height:10px;background:#ddd;display:inline-block}
.bar span{display:block;height:10px;background:#2a7ae2}.eta{font-size:1.2em}
.bottleneck{color:#b5400b;font-weight:600}.flash{background:#e6f4ea;padding:6px}
.refused{background:#fde8e8;padding:6px}form.inline{display:inline}
svg.chart .frame{fill:#fff;stroke:#ccc}svg.chart polyline{fill:none;stroke-width:2}
svg.chart .finished{stroke:#2a7ae2}svg.chart .known{stroke:#999;stroke-dasharray:4 3}
svg.chart text{font-size:11px;fill:#555}code{font-size:12px}
"""


def text(value: object) -> str:
    """Any dynamic value as HTML text: credentials redacted, markup escaped."""
    return escape(redact(str(value)))


def page(title: str, body: str, *, refresh_s: int | None = None) -> str:
    """A whole page; with ``refresh_s`` it reloads itself that often, unless a field has focus."""
    script = (
        "<script>setInterval(function(){var a=document.activeElement;"
        'if(!a||a.tagName!=="INPUT")location.reload()},'
        f"{refresh_s * 1000})</script>"
        if refresh_s
        else ""
    )
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{text(title)}</title><style>{STYLE}</style></head><body>"
        f'<p class="muted"><a href="/">crawls</a></p>{body}{script}</body></html>'
    )


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], *, numeric: int = 1) -> str:
    """A table of already escaped cells; columns from ``numeric`` on are right-aligned."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(f'<td class="n">{c}</td>' if i >= numeric else f"<td>{c}</td>"
                  for i, c in enumerate(row))
        + "</tr>"
        for row in rows
    )  # fmt: skip
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


DIFF_MARK = 0.2
"""A field whose fill rate moved by this much between the baseline and the drift is bold."""


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f} %"


def seconds(value: float | None) -> str:
    return "-" if value is None else ("> 30 s" if value == float("inf") else f"≤ {value:g} s")


def progress_bar(finished: int, total: int) -> str:
    share = finished / total if total else 1.0
    return (
        f'<span class="bar"><span style="width:{share * 100:.1f}%"></span></span> '
        f"{finished}/{total} ({share * 100:.0f} %)"
    )


def eta_html(history: CrawlHistory) -> str:
    sample = history.last
    if sample is None:
        return "-"
    eta = sample.eta
    out = f'<span class="eta">ETA {duration(eta.eta_s)}</span>'
    if eta.bottleneck is not None:
        out += f' <span class="bottleneck">(bottleneck: {text(eta.bottleneck)})</span>'
    return out


def crawls_page(histories: dict[str, CrawlHistory], mode: str) -> str:
    rows = []
    for crawl_id, history in sorted(histories.items()):
        sample = history.last
        if sample is None:
            continue
        link = f'<a href="/crawl/{quote(crawl_id, safe="")}">{text(crawl_id)}</a>'
        total = sample.finished + sample.counts.pending
        rows.append([link, text(history.state), progress_bar(sample.finished, total),
                     f"{sample.rate:.1f}/s", eta_html(history)])  # fmt: skip
    body = f"<h1>crawlfleet: {escape(mode)} crawls</h1>"
    if rows:
        body += table(("crawl", "state", "progress", "rate", "ETA"), rows, numeric=3)
    else:
        body += '<p class="muted">no crawl yet</p>'
    return page("crawlfleet crawls", body, refresh_s=5)


def token_field(actions: bool) -> str:
    if not actions:
        return ""
    return '<input type="password" name="token" placeholder="token" size="10" required> '


def action(crawl_id: str, what: str, label: str, actions: bool, **fields: str) -> str:
    hidden = "".join(
        f'<input type="hidden" name="{escape(k)}" value="{escape(v)}">' for k, v in fields.items()
    )
    disabled = "" if actions else " disabled"
    title = "" if actions else ' title="read-only: start the dashboard with --token"'
    return (
        f'<form class="inline" method="post" action="/crawl/{quote(crawl_id, safe="")}/{what}">'
        f"{hidden}{token_field(actions)}"
        f'<button type="submit" name="do" value="{what}"{disabled}{title}>{label}</button></form>'
    )


def summary_html(crawl_id: str, history: CrawlHistory, actions: bool) -> str:
    sample = history.last
    if sample is None:
        return ""
    eta, c = sample.eta, sample.counts
    total = sample.finished + c.pending
    control = action(crawl_id, "resume" if history.state == "paused" else "pause",
                     "resume" if history.state == "paused" else "pause", actions)  # fmt: skip
    return (
        f'<p>state <b id="state">{text(history.state)}</b> {control}</p>'
        f'<p id="progress">{progress_bar(sample.finished, total)} · queued {c.queued}'
        f" · in flight {c.leased} · dead {c.dead} · {sample.rate:.1f} requests/s"
        f" · {sample.stats.errors} errors</p>"
        f'<p id="dropped">{text(dropped_line(sample.stats) or "dropped by limits: nothing")}</p>'
        f'<p id="eta">{eta_html(history)} <span class="muted">naive remaining ÷ rate:'
        f" {duration(eta.naive_s)} · slowest domain's politeness bound:"
        f" {duration(eta.politeness_s)}</span></p>"
    )


def domains_html(rows: Sequence[DomainRow]) -> str:
    cells = [
        [text(r.domain), str(r.queued), str(r.in_flight), str(r.done), str(r.dead),
         percent(r.success_rate), seconds(r.p50_s), seconds(r.p95_s),
         f"{r.delay_s:g} s ({text(r.delay_source)})", text(r.block), text(r.strategy)]
        for r in rows
    ]  # fmt: skip
    headers = ("domain", "queued", "in flight", "done", "dead", "success", "p50", "p95",
               "delay", "block", "strategy")  # fmt: skip
    return f'<h2>domains</h2><div id="domains">{table(headers, cells)}</div>'


def dead_html(crawl_id: str, groups: Sequence[ClassGroup], actions: bool) -> str:
    if not groups:
        return '<h2>dead letters</h2><p class="muted" id="dead">none</p>'
    cells = [
        [text(g.name), str(g.count), "<br>".join(text(u) for u in g.sample_urls),
         action(crawl_id, "dead/requeue", "requeue", actions, error_class=g.name)
         + " " + action(crawl_id, "dead/purge", "purge", actions, error_class=g.name)]
        for g in groups
    ]  # fmt: skip
    return (
        '<h2>dead letters by error class</h2><div id="dead">'
        f"{table(('error class', 'count', 'sample URLs', ''), cells, numeric=1)}</div>"
    )


def items_html(samples: Sequence[ItemSample], stored: dict[str, dict[str, int]]) -> str:
    if not samples and not stored.get("stored"):
        return '<h2>items</h2><p class="muted">none yet</p>'
    types = sorted({s.item_type for s in samples} | set(stored.get("stored", {})))
    by_type = {s.item_type: s for s in samples}
    parts = ["<h2>items and data quality</h2>"]
    for item_type in types:
        counts = " · ".join(f"{k} {stored.get(k, {}).get(item_type, 0)}"
                            for k in ("stored", "invalid", "duplicate"))  # fmt: skip
        parts.append(f"<h3>{text(item_type)}</h3><p>{counts}</p>")
        sample = by_type.get(item_type)
        if sample is None:
            continue
        fill = [[text(name), percent(rate)] for name, rate in sample.fill_rates().items()]
        parts.append(f'<p class="muted">fill rate over the latest {sample.read} items</p>')
        parts.append(table(("field", "filled"), fill))
        shown = "".join(
            f"<pre><code>{text(orjson.dumps(d, option=orjson.OPT_INDENT_2).decode())}</code></pre>"
            for d in sample.samples
        )
        parts.append(f"<details><summary>samples</summary>{shown}</details>")
    return "".join(parts)


def drifts_html(
    crawl_id: str,
    rows: Sequence[DomainRow],
    actions: bool,
    samples: Mapping[str, Sequence[KeptSample]] | None,
) -> str:
    """A row per (parser, domain) whose drift test fired: each expected field's fill rate
    at rest against the run that fired it, the parser's sample pages (``samples``: parser ->
    its kept pages; None when this dashboard cannot read them), and the resume action."""
    cells = [
        [text(parser), text(row.domain), text(mark),
         field_diff_html(row.drift_fields.get(parser, {})),
         sample_links(crawl_id, samples, parser),
         action(crawl_id, "resume-parser", "resume parser", actions, parser=parser,
                domain=row.domain)]
        for row in rows
        for parser, mark in sorted(row.drifts.items())
    ]  # fmt: skip
    if not cells:
        return ""
    headers = ("parser", "domain", "drift", "fill rate: baseline → recent", "sample pages", "")
    return (
        '<h2>parser drifts</h2><p class="muted">fix the parser first (its sample pages: the '
        "first page per missing part, kept in &lt;state&gt;/mismatch/); resuming requeues its "
        "mismatched pages on the domain</p>"
        f'<div id="drifts">{table(headers, cells)}</div>'
    )


def field_diff_html(diff: Mapping[str, Sequence[float | None]]) -> str:
    """``price 100% → 0%`` a field, the changed ones marked."""
    if not diff:
        return "-"
    parts = []
    for name, (before, after) in diff.items():
        shown = f"{text(name)} {percent(before)} → {percent(after)}"
        moved = before is not None and after is not None and abs(before - after) >= DIFF_MARK
        parts.append(f"<strong>{shown}</strong>" if moved else shown)
    return '<span class="diff">' + "<br>".join(parts) + "</span>"


def sample_links(
    crawl_id: str, samples: Mapping[str, Sequence[KeptSample]] | None, parser: str
) -> str:
    if samples is None:
        return '<span class="muted">kept by the workers (their --state)</span>'
    kept = samples.get(parser, ())
    if not kept:
        return "-"
    base = f"/crawl/{quote(crawl_id, safe='')}/mismatch"
    return "<br>".join(
        f'<a href="{base}/{quote(s.folder)}/{quote(s.name)}" title="{text(s.url)}">'
        f"{text(s.reason)}</a>"
        for s in kept
    )


def parsers_html(stats: CrawlStats) -> str:
    """Per parser with expectations: pages, the share that met them, items per page, fill
    rates of the expected fields (``monitoring/quality_scores.py``)."""
    found = scores(stats)
    if not found:
        return ""
    cells = [
        [text(name), str(score.pages), percent(score.met_share),
         "-" if score.items_per_page is None else f"{score.items_per_page:.1f}",
         text(" ".join(f"{f}:{r:.0%}" for f, r in score.fill_rates().items()))]
        for name, score in found.items()
    ]  # fmt: skip
    headers = ("parser", "pages", "met expectations", "items/page", "fill rates")
    return (
        '<h2>parsers and their expectations</h2><p class="muted">a drift shows as '
        "<code>drift.PARSER</code> in a domain's strategy; crawlfleet resume-parser re-opens"
        f' it</p><div id="parsers">{table(headers, cells, numeric=1)}</div>'
    )


def stored_quality_html(report: Mapping[str, Any] | None) -> str:
    """The quality scores the dispatcher wrote to PostgreSQL: a row per parser (``all``),
    then per (parser, domain)."""
    if report is None or not report["parsers"]:
        return ""
    cells = [
        [text(parser), text(domain), str(figures["pages"]), percent(figures["met_share"]),
         "-" if figures["items_per_page"] is None else f"{figures['items_per_page']:.1f}",
         text(" ".join(f"{f}:{r:.0%}" for f, r in figures["fill_rates"].items()))]
        for parser, score in report["parsers"].items()
        for domain, figures in [("all", score), *score["domains"].items()]
    ]  # fmt: skip
    written = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(report["updated_at"]))
    headers = ("parser", "domain", "pages", "met expectations", "items/page", "fill rates")
    return (
        f'<h2>quality scores in PostgreSQL</h2><p class="muted">written by the dispatcher,'
        f' last at {written}</p><div id="stored-quality">{table(headers, cells, numeric=2)}</div>'
    )


def workers_html(workers: Sequence[WorkerRow]) -> str:
    if not workers:
        return '<h2>workers</h2><p class="muted" id="workers">no worker seen yet</p>'
    cells = [
        [text(w.name), "yes" if w.live else "no", f"{w.seen_ago_s:.0f} s ago", text(w.crawl),
         text(",".join(w.queues)), str(w.concurrency),
         "-" if w.in_flight is None else str(w.in_flight),
         "-" if w.pages_per_s is None else f"{w.pages_per_s:.2f}"]
        for w in workers
    ]  # fmt: skip
    headers = ("worker", "live", "heartbeat", "crawl", "queues", "concurrency", "in flight",
               "pages/s")  # fmt: skip
    return f'<h2>workers</h2><div id="workers">{table(headers, cells, numeric=5)}</div>'


def crawl_page(
    crawl_id: str,
    history: CrawlHistory,
    *,
    domains: Sequence[DomainRow],
    groups: Sequence[ClassGroup],
    items: Sequence[ItemSample],
    workers: Sequence[WorkerRow],
    actions: bool,
    samples: Mapping[str, Sequence[KeptSample]] | None = None,
    stored_quality: Mapping[str, Any] | None = None,
    flash: str = "",
) -> str:
    sample = history.last
    stored = (
        {k: sample.stats.items(k) for k in ("stored", "invalid", "duplicate")} if sample else {}
    )
    attempts = f"/crawl/{quote(crawl_id, safe='')}/attempts"
    body = (
        f"<h1>crawl {text(crawl_id)}</h1>"
        + (f'<p class="flash" id="flash">{text(flash)}</p>' if flash else "")
        + summary_html(crawl_id, history, actions)
        + f"<h2>progress</h2>{progress_svg(list(history.points))}"
        + domains_html(domains)
        + dead_html(crawl_id, groups, actions)
        + f'<h2>attempts</h2><p><a href="{attempts}">recent attempts, with filters</a></p>'
        + items_html(items, stored)
        + (parsers_html(sample.stats) if sample else "")
        + stored_quality_html(stored_quality)
        + drifts_html(crawl_id, domains, actions, samples)
        + workers_html(workers)
    )
    return page(f"crawl {crawl_id}", body, refresh_s=5)


def attempts_page(crawl_id: str, where: AttemptFilter, attempts: Sequence[Attempt]) -> str:
    def field(name: str, value: object) -> str:
        shown = "" if value is None else escape(str(value))
        return f'<label>{name} <input name="{name}" value="{shown}" size="14"></label> '

    form = (
        '<form method="get">'
        + field("domain", where.domain)
        + field("outcome", where.outcome)
        + field("status", where.status)
        + '<button type="submit">filter</button></form>'
    )
    cells = [
        [text(a.url), text(a.domain), text(a.outcome.value), "" if a.status is None
         else str(a.status), f"{a.latency_s * 1000:.0f} ms", str(a.retry), text(a.worker),
         text(a.error or ""), text(a.detail if a.outcome is Outcome.OK and a.detail else "")]
        for a in attempts
    ]  # fmt: skip
    headers = ("url", "domain", "outcome", "status", "latency", "retry", "worker", "error",
               "dropped by limits")  # fmt: skip
    back = f'<p><a href="/crawl/{quote(crawl_id, safe="")}">back to the crawl</a></p>'
    body = (
        f"<h1>attempts of {text(crawl_id)}</h1>{back}{form}"
        f'<div id="attempts">{table(headers, cells, numeric=3)}</div>'
    )
    return page(f"attempts of {crawl_id}", body)


def message_page(title: str, message: str, css: str) -> str:
    return page(title, f'<h1>{text(title)}</h1><p class="{css}" id="message">{text(message)}</p>')


def query(**params: str) -> str:
    return urlencode({k: v for k, v in params.items() if v})
