"""Crawl statistics as named counters: what one attempt adds, and how to read them back.

Every store keeps these counters per crawl and per domain, added in the same atomic step as
the lease change they describe (``frontier.protocols.QueueStore``), so every process of a
crawl, and every view (progress, ``status``, the summary, metrics), reads one truth.

Names (all plain increments; ``<t>`` is an item type):

==========================  ==============================================================
``attempts``                lease ends of any kind (fetches, skips, expired leases)
``outcome.<o>``             attempts by ``records.Outcome`` value (ok, retry, dead, ...)
``fetched``                 attempts that got an HTTP response
``status.<c>``              responses by class: ``2xx`` ... ``5xx``, ``other``
``fetched.<o>.<c>``         responses by outcome and status class (``fetched.ok.2xx``)
``bytes``                   response body bytes
``latency_s.sum``           seconds from request to last body byte, summed over responses
``latency_s.le.<b>``        responses in histogram bucket ``b`` (upper bound, seconds; not
                            cumulative: bucket ``0.25`` holds 0.1 < latency <= 0.25)
``blocks``                  responses judged a block (403, 429, challenge page)
``lease_expired``           leases that ran out (the worker was lost)
``items.stored.<t>``        items written to the sink
``items.invalid.<t>``       items kept as rejects (failed validation)
``items.duplicate.<t>``     items dropped as duplicates
``fresh.unchanged``         revisits that found the page as it was (a 304 or the same body):
                            not parsed
``fresh.not_modified``      of those, the 304s
``fresh.changed``           revisits of a known page with a new body (parsed)
``dropped.<r>``             links, redirects, sitemap entries or sitemaps a limit dropped
                            (the budget's refusals included),
                            by the limit's name (``Limit``); a link counts on every page
                            it was dropped from
``filtered.<r>``            links the crawl's scope leaves out by choice, not by a limit
                            (``Filtered``): off-site, refused by ``deny`` or ``allow``, or
                            not a URL
``schema_changes.<t>``      schema changes of item type ``<t>`` a process saw first
                            (``pipeline/schema_watch.py``: each logged once)
``mismatch.<p>``            pages of parser ``<p>`` that missed its expectations (first parses)
``quality.<p>.<m>``         parser ``<p>``'s quality figures on first parses
                            (``runtime/attempts.quality_counters``): ``pages`` checked,
                            ``met``, ``items``, ``filled.<f>`` (items filling expected
                            field ``<f>``)
==========================  ==============================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from crawlfleet.records import Attempt, Outcome

LATENCY_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, float("inf"))
Counters = dict[str, float]


class Limit(StrEnum):
    """A limit that drops something, named as the setting (or constant) that sets it."""

    MAX_LINKS_PER_PAGE = "max_links_per_page"
    MAX_DEPTH = "max_depth"
    MAX_URL_CHARS = "max_url_chars"
    MAX_PATH_SEGMENT_REPEATS = "max_path_segment_repeats"
    MAX_QUERY_PARAMS = "max_query_params"
    MAX_REDIRECTS = "max_redirects"
    MAX_PAGES = "max_pages"
    """New URLs the store refused past the crawl's budget (not marked seen: a URL linked
    again is refused and counted again)."""
    MAX_PAGES_PER_DOMAIN = "max_pages_per_domain"
    SITEMAP_URL_CHARS = "sitemap_url_chars"
    """Sitemap entries longer than the sitemaps.org limit (2,048 characters)."""
    SITEMAP_MAX_URLS = "sitemap_max_urls"
    """Sitemaps read in part or not at all once a seed's sitemaps gave their most URLs."""
    SITEMAP_MAX_DEPTH = "sitemap_max_depth"
    SITEMAP_MAX_SITEMAPS = "sitemap_max_sitemaps"
    SITEMAP_MAX_BYTES = "sitemap_max_bytes"
    """These three leave whole sitemaps unread (an index too deep, too many, too large)."""


LIMIT_UNITS: Mapping[Limit, str] = {
    **dict.fromkeys(
        (
            Limit.MAX_LINKS_PER_PAGE,
            Limit.MAX_DEPTH,
            Limit.MAX_URL_CHARS,
            Limit.MAX_PATH_SEGMENT_REPEATS,
            Limit.MAX_QUERY_PARAMS,
            Limit.MAX_PAGES,
            Limit.MAX_PAGES_PER_DOMAIN,
        ),
        "links",
    ),
    Limit.MAX_REDIRECTS: "redirects",
    Limit.SITEMAP_URL_CHARS: "sitemap entries",
    **dict.fromkeys(
        (
            Limit.SITEMAP_MAX_URLS,
            Limit.SITEMAP_MAX_DEPTH,
            Limit.SITEMAP_MAX_SITEMAPS,
            Limit.SITEMAP_MAX_BYTES,
        ),
        "sitemaps",
    ),
}
"""What each limit drops, in the order the end-of-crawl line lists them."""


class Filtered(StrEnum):
    """Why the crawl's scope leaves a link out by the user's choice (not a limit)."""

    OFF_SITE = "off_site"
    DENY = "deny"
    ALLOW = "allow"
    BAD_URL = "bad_url"


def dropped_counter(reason: Limit | Filtered) -> str:
    """The counter of ``reason``: ``dropped.<limit>`` or ``filtered.<reason>``."""
    kind = "dropped" if isinstance(reason, Limit) else "filtered"
    return f"{kind}.{reason.value}"


def bucket_name(latency_s: float) -> str:
    """The ``latency_s.le.<b>`` counter a latency falls in."""
    for bound in LATENCY_BUCKETS_S:
        if latency_s <= bound:
            return f"latency_s.le.{bound:g}"
    return "latency_s.le.inf"


def status_class(status: int) -> str:
    return f"{status // 100}xx" if 200 <= status < 600 else "other"


def for_attempt(attempt: Attempt, *, blocked: bool = False) -> Counters:
    """The counters one attempt adds."""
    counters: Counters = {"attempts": 1, f"outcome.{attempt.outcome.value}": 1}
    if attempt.status is not None:
        counters["fetched"] = 1
        status = status_class(attempt.status)
        counters[f"status.{status}"] = 1
        counters[f"fetched.{attempt.outcome.value}.{status}"] = 1
        counters["bytes"] = attempt.bytes
        counters["latency_s.sum"] = attempt.latency_s
        counters[bucket_name(attempt.latency_s)] = 1
    if blocked:
        counters["blocks"] = 1
    return counters


def merge(into: Counters, more: Mapping[str, float]) -> None:
    for name, value in more.items():
        into[name] = into.get(name, 0) + value


@dataclass(frozen=True, slots=True)
class CrawlStats:
    """A read of a crawl's (or one domain's) counters, with helpers for what views show."""

    counters: Mapping[str, float] = field(default_factory=dict)
    started_at: float | None = None

    def get(self, name: str) -> int:
        return int(self.counters.get(name, 0))

    @property
    def pages(self) -> int:
        """Pages fetched and processed (outcome ok)."""
        return self.get(f"outcome.{Outcome.OK.value}")

    @property
    def fetched(self) -> int:
        return self.get("fetched")

    @property
    def errors(self) -> int:
        return sum(
            self.get(f"outcome.{o.value}")
            for o in (
                Outcome.RETRY,
                Outcome.DEAD,
                Outcome.FAILED,
                Outcome.PARSE_ERROR,
                Outcome.MISMATCH,
            )
        )

    @property
    def mean_latency_s(self) -> float:
        fetched = self.fetched
        return self.counters.get("latency_s.sum", 0.0) / fetched if fetched else 0.0

    def items(self, kind: str) -> dict[str, int]:
        """Item counts by type for ``kind`` in ``stored``, ``invalid``, ``duplicate``."""
        prefix = f"items.{kind}."
        return {
            name[len(prefix) :]: int(value)
            for name, value in self.counters.items()
            if name.startswith(prefix)
        }

    def dropped(self) -> dict[Limit, int]:
        """What each limit dropped (limits that dropped nothing left out), in unit order."""
        counts = {reason: self.get(dropped_counter(reason)) for reason in LIMIT_UNITS}
        return {reason: count for reason, count in counts.items() if count}

    def filtered(self) -> dict[Filtered, int]:
        """Links the scope left out, by reason (reasons with none left out)."""
        counts = {reason: self.get(dropped_counter(reason)) for reason in Filtered}
        return {reason: count for reason, count in counts.items() if count}

    def statuses(self) -> dict[str, int]:
        return {
            name[len("status.") :]: int(value)
            for name, value in self.counters.items()
            if name.startswith("status.")
        }

    def latency_quantile_s(self, q: float) -> float | None:
        """An upper bound of the ``q`` quantile from the histogram; None without responses."""
        total = sum(self.get(bucket_name(b)) for b in LATENCY_BUCKETS_S)
        if total == 0:
            return None
        seen = 0
        for bound in LATENCY_BUCKETS_S:
            seen += self.get(bucket_name(bound))
            if seen >= q * total:
                return bound
        return LATENCY_BUCKETS_S[-1]
