"""The browser lane's fetcher: the browser, or what the adaptive fetcher learned instead.

For a URL whose fetcher is ``auto`` (its parser's or its domain's: ``runtime/choice/routing.py``)
this fetcher reads what the domain's strategy slot learned for the URL's parser
(``frontier/learned.py``):

- learned ``browser``: the browser fetches it;
- learned ``http`` (a request queued while the parser was still sampled, or one of its
  re-check samples): re-check samples are fetched both ways and compared; the others go
  over HTTP;
- still sampling: fetched both ways, concurrently (one sample of a parser at a time per
  process; the others wait for what it learns). Both results are parsed by the URL's
  parser; when their items and links are equal the sample counts toward ``SAMPLES``, after
  which the parser is learned ``http``; a difference makes it ``browser`` at once. A
  learned ``http`` whose re-check differs becomes ``browser``.

The browser's result is the one the crawl keeps whenever it was fetched: it is the truth
the comparison is about. Any other URL is fetched by the browser.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from crawlfleet.errors import FetchError
from crawlfleet.fetchers.protocols import Fetcher
from crawlfleet.frontier.frontier import Frontier
from crawlfleet.frontier.learned import SAMPLES, rechecked, samples_key
from crawlfleet.models import CrawlRequest, FetchResult, ParseResult
from crawlfleet.parsing.budget import ParseBudget
from crawlfleet.parsing.registry import ParserRegistry
from crawlfleet.runtime.choice.routing import Router

log = logging.getLogger("crawlfleet.runtime.adaptive")  # its name before #36 (decision 0062)


class AdaptiveFetcher:
    """The browser lane's ``Fetcher``: ``browser``, or ``http`` where that was learned."""

    def __init__(
        self,
        browser: Fetcher,
        http: Fetcher,
        *,
        router: Router,
        registry: ParserRegistry,
        budget: ParseBudget,
        frontier: Frontier,
    ) -> None:
        self.browser = browser
        self._http = http
        self._router = router
        self._registry = registry
        self._budget = budget
        self._frontier = frontier
        self._sampling: dict[tuple[str, str], asyncio.Lock] = {}

    async def fetch(self, request: CrawlRequest) -> FetchResult:
        key = self._router.auto_key(request.url)
        if key is None:
            return await self.browser.fetch(request)
        learned = (await self._frontier.strategy(request.domain)).get(key)
        if learned is None:
            # One sample at a time per parser in this process: the pages queued meanwhile
            # follow what it learns instead of each being fetched both ways.
            async with self._sampling.setdefault((request.domain, key), asyncio.Lock()):
                learned = (await self._frontier.strategy(request.domain)).get(key)
                if learned is None:
                    return await self._sample(request, key)
        if learned == "browser":
            return await self.browser.fetch(request)
        if learned == "http" and not rechecked(request.fingerprint):
            return await self._http.fetch(request)
        return await self._sample(request, key)

    async def _sample(self, request: CrawlRequest, key: str) -> FetchResult:
        """Fetch both ways, compare what the parser gets, record it; the browser's result."""
        rendered, plain = await asyncio.gather(
            self.browser.fetch(request), self._http.fetch(request), return_exceptions=True
        )
        if isinstance(rendered, BaseException):
            raise rendered
        if isinstance(plain, FetchError):
            await self._learn(request.domain, key, same=False, why=str(plain))
            return rendered
        if isinstance(plain, BaseException):
            raise plain
        same = await self._same(rendered, plain)
        await self._learn(request.domain, key, same=same, why=request.url)
        return rendered

    async def _same(self, rendered: FetchResult, plain: FetchResult) -> bool:
        if rendered.status != plain.status:
            return False
        _, parser = self._registry.select(rendered.final_url)
        try:
            one, _ = await self._budget.parse(parser, rendered)
            other, _ = await self._budget.parse(parser, plain)
        except Exception:  # a parser failing on either page: not the same result
            return False
        return _digest(one) == _digest(other)

    async def _learn(self, domain: str, key: str, *, same: bool, why: str) -> None:
        """Write the sample's verdict into the domain's strategy slot (others' keys kept)."""
        strategy = await self._frontier.strategy(domain)
        before = strategy.get(key)
        if not same:
            strategy[key] = "browser"
            strategy.pop(samples_key(key), None)
        elif before is None:
            count = int(strategy.get(samples_key(key), "0")) + 1
            if count >= SAMPLES:
                strategy[key] = "http"
                strategy.pop(samples_key(key), None)
            else:
                strategy[samples_key(key)] = str(count)
        if strategy.get(key) != before:
            log.info("%s %s learned %s (sample %s)", domain, key, strategy[key], why)
        await self._frontier.set_strategy(domain, strategy)

    async def close(self) -> None:
        """Nothing of its own: the browser and HTTP fetchers are closed by their owner."""


def _digest(parsed: ParseResult) -> tuple[Any, ...]:
    """Items and links of a parse, comparable: item data and keys, link targets, in order."""
    items = tuple(sorted((i.type, i.key, repr(sorted(i.data.items()))) for i in parsed.items))
    links = tuple(sorted(link.identity for link in parsed.links))
    return items, links
