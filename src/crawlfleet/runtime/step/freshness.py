"""The crawl step's part in keeping data fresh: conditional requests and the next visit.

Before a fetch, ``Freshness.known`` reads what the frontier knows of the URL (``Visit``)
and ``conditional`` adds its validators (``If-None-Match``, ``If-Modified-Since``). After
it, a 304 or a 200 whose body hashes as at the last visit is **unchanged**: not parsed,
its items' ``last_seen`` moved. Every page parsed or found unchanged is remembered with the
validators of its response, its body hash and its next visit (``recrawl.RecrawlPolicy``):
``next_visit`` makes the ``Visit`` its lease's ``complete`` records (``Report.visit``).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, replace

from crawlfleet.clock import Clock
from crawlfleet.frontier.frontier import Frontier
from crawlfleet.frontier.store_types import Visit
from crawlfleet.models import CrawlRequest, FetchResult, ParseResult
from crawlfleet.recrawl import RecrawlPolicy

NOT_MODIFIED = 304
GONE_STATUSES = frozenset({404, 410})


def body_hash(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def conditional(request: CrawlRequest, visit: Visit | None) -> CrawlRequest:
    """``request`` with the validators of its last 200 as conditional headers."""
    if visit is None or not (visit.etag or visit.last_modified):
        return request
    headers = dict(request.headers)
    if visit.etag:
        headers["If-None-Match"] = visit.etag
    if visit.last_modified:
        headers["If-Modified-Since"] = visit.last_modified
    return replace(request, headers=headers)


@dataclass(frozen=True, slots=True)
class Freshness:
    """Known-URL reads and writes of the crawl step, under the crawl's recrawl policy."""

    frontier: Frontier
    policy: RecrawlPolicy
    clock: Clock

    async def known(self, request: CrawlRequest) -> Visit | None:
        """What the frontier knows of the URL (None when the crawl revisits nothing)."""
        if not self.policy.enabled:
            return None
        return await self.frontier.visit(request.fingerprint)

    @staticmethod
    def unchanged(result: FetchResult, visit: Visit | None) -> bool:
        """Whether the response says the page is as at ``visit`` (a 304, or the same body)."""
        if visit is None:
            return False
        if result.status == NOT_MODIFIED:
            return True
        return result.status == 200 and body_hash(result.body) == visit.content_hash

    def again(self, visit: Visit | None) -> Visit | None:
        """A known URL whose visit failed (a parser error, a 4xx other than 404/410) keeps
        what was known and is due again after the same interval; None for an unknown one."""
        if visit is None or not math.isfinite(visit.interval_s):
            return None
        return replace(visit, next_at=self.clock.now() + visit.interval_s)

    def next_visit(
        self,
        request: CrawlRequest,
        result: FetchResult,
        visit: Visit | None,
        parsed: ParseResult | None,
    ) -> Visit | None:
        """What to know of the URL after this visit (None when the crawl revisits nothing).

        ``visit`` is the last one; ``parsed`` is None for an unchanged page (its validators
        and hash are kept).
        """
        if not self.policy.enabled:
            return None
        if parsed is None and visit is not None:
            etag, modified, digest = visit.etag, visit.last_modified, visit.content_hash
            types, changed = visit.item_types, False
        else:
            etag = result.headers.get("etag", "")
            modified = result.headers.get("last-modified", "")
            digest = body_hash(result.body)
            types = tuple(sorted({item.type for item in parsed.items})) if parsed else ()
            changed = True
        wish = parsed.revisit if parsed is not None else None
        due = self.policy.next_due(
            request.url,
            types,
            previous_s=visit.interval_s if visit is not None else None,
            changed=changed,
            after_s=wish.after_s if wish is not None else None,
            priority=wish.priority if wish is not None else 0,
        )
        if wish is None and visit is not None and parsed is None:
            priority = visit.priority
        else:
            priority = due.priority or request.priority
        now = self.clock.now()
        next_at = now + due.interval_s if math.isfinite(due.interval_s) else math.inf
        return Visit(etag, modified, digest, due.interval_s, next_at, priority, types, now)
