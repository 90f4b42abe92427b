"""Request/response hooks: the crawl's own code around every HTTP fetch, in an explicit order.

``hooks = ["module:object", ...]`` in the config names objects following ``FetchHook``
(``Hook`` is a base class with pass-through defaults). A request passes the hooks first to
last, its response comes back last to first, like a middleware list: the first hook is the
outermost. A hook drops a request or a response by raising ``Dropped``: the fetch fails with
that reason and is not retried.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from crawlfleet.errors import ConfigError, FetchError
from crawlfleet.fetchers.protocols import Fetcher
from crawlfleet.models import CrawlRequest, FetchResult
from crawlfleet.references import resolve


class Dropped(FetchError):
    """A hook refused a request or a response; the message is its reason."""

    transient = False


@runtime_checkable
class FetchHook(Protocol):
    """One step around a fetch.

    ``request`` returns the request to send (the same one, or a changed copy: a signed URL,
    another priority); ``response`` returns the response the crawl sees (the same one, or a
    changed copy). Either raises ``Dropped`` to stop the fetch; any other exception is a bug
    of the hook and fails the fetch like a network error would (retried). Both are called
    for every HTTP fetch of the crawl, replayed from the HTTP cache or not, robots.txt and
    sitemap reads excepted. Hooks are shared by the concurrent fetches of a process: keep
    state in them safe for that.
    """

    async def request(self, request: CrawlRequest) -> CrawlRequest: ...

    async def response(self, request: CrawlRequest, result: FetchResult) -> FetchResult: ...


class Hook:
    """A ``FetchHook`` changing nothing: subclass it and override the side you need."""

    async def request(self, request: CrawlRequest) -> CrawlRequest:
        return request

    async def response(self, request: CrawlRequest, result: FetchResult) -> FetchResult:
        return result


def load_hooks(references: Sequence[str]) -> list[FetchHook]:
    """The hooks the references name; a class is instantiated without arguments."""
    hooks: list[FetchHook] = []
    for reference in references:
        found = resolve(reference, "hooks")
        if isinstance(found, type):
            try:
                found = found()
            except Exception as exc:
                raise ConfigError(f"hooks: cannot create {reference!r}: {exc}") from None
        if not isinstance(found, FetchHook):
            raise ConfigError(
                f"hooks: {reference!r} has no async request() and response() (see FetchHook)"
            )
        hooks.append(found)
    return hooks


class HookedFetcher:
    """``inner`` with ``hooks`` around it; a ``Fetcher``."""

    def __init__(self, inner: Fetcher, hooks: Sequence[FetchHook]) -> None:
        self._inner = inner
        self._hooks = tuple(hooks)

    async def fetch(self, request: CrawlRequest) -> FetchResult:
        sent = request
        for hook in self._hooks:
            sent = await hook.request(sent)
        result = await self._inner.fetch(sent)
        for hook in reversed(self._hooks):
            result = await hook.response(sent, result)
        return result

    async def close(self) -> None:
        await self._inner.close()
