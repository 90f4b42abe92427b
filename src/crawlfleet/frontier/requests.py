"""Links to requests: as a browser would send them, in scope, routed to a fetcher kind;
redirects likewise.

The part of the frontier that turns what a page links to into the ``CrawlRequest``s it
offers its store (``Frontier.requests_for``, ``new_requests``, ``redirect``). A request's
``url`` is the URL as requested (``UrlRules.target``); its fingerprint is taken of the URL's
dedup key. The scope's domain, pattern and trap rules see the URL as requested, as robots.txt
does: the URL a user finds in the pages, the attempt log and the exports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import NamedTuple

from crawlfleet.counters import Counters, Filtered, Limit, dropped_counter
from crawlfleet.errors import BadUrl
from crawlfleet.frontier.offered import OfferedUrls
from crawlfleet.frontier.scope import Refusal, Scope
from crawlfleet.models import CrawlRequest, Link, link_request
from crawlfleet.urls import URL_CACHE_SIZE, UrlRules, fingerprint, request_fingerprint

Route = Callable[[str, str | None], str]
"""The fetcher kind of a new request: ``route(request URL, kind its link names or None)``."""


def default_route(url: str, named: str | None) -> str:
    """The link's kind, else ``file`` for ``file:`` URLs, else ``http``."""
    return named or ("file" if url.startswith("file:") else "http")


class UrlFacts(NamedTuple):
    """What the crawl's fixed rules say of a link's URL, whichever page links it."""

    url: str  # as requested
    key: str  # its dedup key
    fingerprint: str  # of a GET without a body ("" when refused)
    domain: str  # its politeness key ("" when refused)
    refusal: Refusal | None  # why the scope refuses it at any depth, if it does


class LinkRules:
    """What a link must pass to become a request, and the fetcher kind it gets."""

    def __init__(self, rules: UrlRules, scope: Scope, route: Route) -> None:
        self.rules = rules
        self.scope = scope
        self.route = route
        # A URL is linked from many pages (javadoc: 300,000 links to 10,000 URLs): what the
        # URL rules and the scope say of it is worked out once (decision 0058).
        self.facts = lru_cache(maxsize=URL_CACHE_SIZE)(self._facts)

    def _facts(self, link_url: str) -> UrlFacts:
        """``UrlFacts`` of a link's URL as the page gave it; raises ``BadUrl``."""
        url, key = self.rules.target(link_url)
        refusal = self.scope.url_refusal(url)
        if refusal is not None:
            return UrlFacts(url, key, "", "", refusal)
        return UrlFacts(url, key, fingerprint(key), self.rules.politeness_key(url), None)


def build_requests(
    links: Iterable[Link | str],
    parent: CrawlRequest | None,
    link_rules: LinkRules,
    offered: OfferedUrls | None,
) -> tuple[list[CrawlRequest], list[tuple[str, Refusal]], int]:
    """The requests, the rejected links with why, and how many were skipped as ``offered``.

    ``offered``: request URLs of plain requests the store was offered before (it would
    refuse them as seen: same URL, same key); the caller checked that the links' depth is
    within the scope.
    """
    depth = parent.depth + 1 if parent is not None else 0
    parent_url = parent.url if parent is not None else None
    requests: list[CrawlRequest] = []
    rejected: list[tuple[str, Refusal]] = []
    known = 0
    facts_of = link_rules.facts
    scope = link_rules.scope
    too_deep = scope.max_depth is not None and depth > scope.max_depth
    route = link_rules.route
    for link in links:
        if isinstance(link, str):
            link = Link(link)
        # An offered URL was in scope (scope is fixed; the caller checked the depth), and so
        # is a link whose request URL was offered: as written, else once serialized.
        memo = offered if not link.body and link.method == "GET" else None
        if memo is not None and memo.seen(link.url):
            known += 1
            continue
        try:
            facts = facts_of(link.url)
        except BadUrl as exc:
            rejected.append((link.url, Refusal(Filtered.BAD_URL, str(exc))))
            continue
        url = facts.url
        if memo is not None and url != link.url and memo.seen(url):
            known += 1
            continue
        reason = scope.reason_to_skip(url, depth) if too_deep else facts.refusal
        if reason is not None:
            rejected.append((url, reason))
            continue
        plain = link.method == "GET" and not link.body
        requests.append(
            link_request(
                url,
                facts.fingerprint
                if plain
                else request_fingerprint(facts.key, link.method, link.body),
                facts.domain,
                depth,
                link.priority,
                route(url, link.fetcher),
                parent_url,
                dict(link.data),
                link.method,
                link.body,
                dict(link.headers),
            )
        )
    return requests, rejected, known


def refused_counters(rejected: Iterable[tuple[str, Refusal]]) -> Counters:
    """The ``dropped.<limit>`` and ``filtered.<reason>`` counters of rejected links."""
    counted: Counters = {}
    for _, refusal in rejected:
        name = dropped_counter(refusal.reason)
        counted[name] = counted.get(name, 0) + 1
    return counted


def redirect_request(
    parent: CrawlRequest, location: str, link_rules: LinkRules, max_redirects: int
) -> CrawlRequest | Refusal:
    """The request a redirect leads to (same depth, one more hop), or why it is refused.

    It keeps the parent's context and headers and is a GET (as browsers follow a 301, 302 or
    303 after a POST; a 307 or 308 after a POST is followed as a GET too).
    """
    if parent.hops >= max_redirects:
        return Refusal(Limit.MAX_REDIRECTS, f"too many redirects ({parent.hops + 1})")
    try:
        url, key = link_rules.rules.target(location)
    except BadUrl as exc:
        return Refusal(Filtered.BAD_URL, f"bad redirect: {exc}")
    reason = link_rules.scope.reason_to_skip(url, parent.depth)
    if reason is not None:
        return Refusal(reason.reason, f"redirect to {url} skipped: {reason.text}")
    return CrawlRequest(
        url=url,
        fingerprint=fingerprint(key),
        domain=link_rules.rules.politeness_key(url),
        depth=parent.depth,
        priority=parent.priority,
        fetcher=parent.fetcher,
        parent=parent.url,
        hops=parent.hops + 1,
        data=parent.data,
        headers=parent.headers,
    )
