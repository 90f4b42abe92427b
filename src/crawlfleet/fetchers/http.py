"""The HTTP fetcher: our own redirects, credentials, limits and address guard, over a transport.

Each hop goes through a ``fetchers.transport.Transport`` (``fetchers.wire.Wire``: keep-alive
HTTP/1.1 parsed by httptools, directly or through the crawl session's proxy; decisions 0038
and 0060). Every failure becomes a ``FetchError`` (or subclass) whose message names the URL.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping

from multidict import CIMultiDict

from crawlfleet.archive.protocols import ResponseKeeper, Sent
from crawlfleet.clock import Clock, SystemClock
from crawlfleet.errors import FetchError, ForbiddenAddress
from crawlfleet.fetchers.addresses import (
    AddressPredicate,
    check_literal_host,
    is_forbidden_address,
)
from crawlfleet.fetchers.credentials import Credentials, basic_auth
from crawlfleet.fetchers.decoding import decode_body
from crawlfleet.fetchers.headers import default_headers
from crawlfleet.fetchers.hops import Hop
from crawlfleet.fetchers.options import FetchOptions
from crawlfleet.fetchers.protocols import Via
from crawlfleet.fetchers.target import http_target, url_of
from crawlfleet.fetchers.transport import Transport, fetch_failure, proxy_of
from crawlfleet.fetchers.wire import Wire
from crawlfleet.models import CrawlRequest, FetchResult
from crawlfleet.urls import join

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_HTTP_SCHEMES = frozenset({"http", "https"})


INLINE_DECODE_BYTES = 256 * 1024
"""A body that decodes to at most this is decoded on the event loop (at most ~0.6 ms of CPU):
the hop to a worker thread cost more than decoding a page of the bench site (decision 0064).
A larger one (up to 90 ms of CPU per 10 MiB, ``fetchers.decoding``) is decoded in a thread."""


class HttpFetcher:
    """Fetches http(s) URLs; a ``Fetcher``.

    ``forbidden`` decides which resolved addresses may not be connected to (default:
    ``is_forbidden_address``); it is not consulted when ``options.allow_private_addresses``.
    With ``follow_redirects=False`` a 3xx response is returned as it is (the crawl loop
    queues its Location, so a page reached by a redirect and by a link is fetched once).
    Cookies are not kept between fetches. ``credentials`` are sent as Basic auth to their
    own origin only, hop by hop; userinfo in a URL is never sent. The request's method, body
    and headers are sent as ``fetchers.hops.Hop`` says, redirect by redirect. Create, use and close it in
    one event loop. ``keeper`` (the crawl's archive) gets every response returned, with its
    body as sent, before ``fetch`` returns it.

    ``transport`` (default: a ``Wire`` of its own, guarded by ``forbidden``) carries every
    hop; one given is shared (a crawl's pages, robots.txt and sitemaps) and its owner closes
    it: ``close`` closes only a transport the fetcher made.
    """

    def __init__(
        self,
        options: FetchOptions,
        *,
        clock: Clock | None = None,
        forbidden: AddressPredicate | None = None,
        follow_redirects: bool = True,
        credentials: Credentials | None = None,
        keeper: ResponseKeeper | None = None,
        transport: Transport | None = None,
    ) -> None:
        self._options = options
        self._keeper = keeper
        self._credentials = credentials if credentials is not None else Credentials()
        self._follow = follow_redirects
        self._clock = clock or SystemClock()
        self._forbidden = (
            None if options.allow_private_addresses else (forbidden or is_forbidden_address)
        )
        self._headers = default_headers(options.user_agent)
        self._owns_transport = transport is None
        self._transport = transport or wire_for(options, self._forbidden)

    async def fetch(
        self,
        request: CrawlRequest,
        *,
        truncate_at_bytes: int | None = None,
        via: Via | None = None,
    ) -> FetchResult:
        """Follow redirects to a response and return it, whatever its status.

        ``truncate_at_bytes``: keep the first that many bytes of the decoded body and stop
        reading, where a body past ``max_body_bytes`` or ``max_decompressed_bytes`` would
        otherwise fail with ``TooLarge`` (robots.txt: RFC 9309 section 2.5). ``via``: the
        proxy and header profile of a crawl session (one connection pool for all of them).
        """
        base = dict(via.headers) if via is not None and via.headers else self._headers
        started = time.perf_counter()
        url = request.url
        redirects: list[str] = []
        # The total deadline: kept by the transport, by a timeout around decoding.
        deadline = asyncio.get_running_loop().time() + self._options.total_timeout_s
        try:
            proxy = (
                proxy_of(via.proxy, via.proxy_auth)
                if via is not None and via.proxy is not None
                else None
            )
            hop = Hop.first(request)
            while True:
                target = http_target(url)
                if self._forbidden is not None:
                    check_literal_host(target.host, self._forbidden)
                auth = self._credentials.for_url(url)
                sent = hop.headers_for(url_of(url)) if hop.headers else {}
                if auth:
                    sent["Authorization"] = basic_auth(*auth)
                headers_sent = _merged(base, sent) if sent else base
                response = await self._transport.send(
                    url,
                    target,
                    hop.method,
                    headers_sent,
                    hop.body,
                    proxy=proxy,
                    limit=self._options.max_body_bytes,
                    cut_at=truncate_at_bytes,
                    deadline=deadline,
                )
                status, headers = response.status, response.headers
                raw, peer = response.take_body(), response.peer
                location = (
                    headers.get("location")
                    if status in REDIRECT_STATUSES and self._follow
                    else None
                )
                if location is None:
                    sent_body = raw
                    if encoding := headers.get("content-encoding"):
                        async with asyncio.timeout_at(deadline):
                            raw = await self._decoded(raw, encoding, url, truncate_at_bytes)
                    body = raw if truncate_at_bytes is None else raw[:truncate_at_bytes]
                    break
                redirects.append(url)
                url = self._next_hop(url, location, redirects)
                hop = hop.after(status)
        except ForbiddenAddress as exc:
            raise ForbiddenAddress(f"{url}: {exc}") from None
        except FetchError:
            raise
        except Exception as exc:
            raise fetch_failure(exc, url, self._options.total_timeout_s) from exc
        result = FetchResult(
            url=request.url,
            final_url=url,
            status=status,
            headers=headers,
            body=body,
            elapsed_s=time.perf_counter() - started,
            redirects=tuple(redirects),
            fetcher="http",
            fetched_at=self._clock.now(),
            request=request,
        )
        if self._keeper is not None:
            cut = truncate_at_bytes is not None and len(sent_body) >= truncate_at_bytes
            kept = Sent(hop.method, headers_sent, hop.body, sent_body, cut, peer)
            await self._keeper.keep(result, kept)
        return result

    async def _decoded(
        self, body: bytes, encoding: str, url: str, truncate_at_bytes: int | None
    ) -> bytes:
        """``body`` with its content codings undone, within the decompressed cap: on the
        event loop when it decodes to at most ``INLINE_DECODE_BYTES``, else in a thread."""
        cap_bytes = self._options.max_decompressed_bytes
        if truncate_at_bytes is not None:
            cap_bytes = min(cap_bytes, truncate_at_bytes)
        truncate = truncate_at_bytes is not None
        if cap_bytes <= INLINE_DECODE_BYTES:
            return decode_body(body, encoding, cap_bytes=cap_bytes, url=url, truncate=truncate)
        if len(body) <= INLINE_DECODE_BYTES:  # a larger body sent decodes larger still
            try:
                return decode_body(body, encoding, cap_bytes=INLINE_DECODE_BYTES, url=url)
            except FetchError:
                pass  # larger, cut or corrupt: decoded again in a thread, which says which
        return await asyncio.to_thread(
            decode_body, body, encoding, cap_bytes=cap_bytes, url=url, truncate=truncate
        )

    def _next_hop(self, current: str, location: str, chain: list[str]) -> str:
        """The absolute URL ``location`` points to, as a browser reads it (``urls.join``), its
        fragment and userinfo dropped; refuses bad targets, loops and long chains."""
        source = chain[-1]
        joined = join(current, location)
        if joined is None:
            raise FetchError(f"{source}: bad redirect Location {location!r}", transient=False)
        scheme, _, rest = joined.partition("://")
        if scheme not in _HTTP_SCHEMES:
            raise FetchError(f"{source}: redirect to non-http(s) URL {joined!r}", transient=False)
        authority, slash, path = rest.partition("/")
        next_url = f"{scheme}://{authority.rpartition('@')[2]}{slash}{path.partition('#')[0]}"
        if next_url in chain:
            raise FetchError(f"redirect loop: {' -> '.join([*chain, next_url])}", transient=False)
        if len(chain) > self._options.max_redirects:
            raise FetchError(
                f"{chain[0]}: more than {self._options.max_redirects} redirects",
                transient=False,
            )
        return next_url

    async def close(self) -> None:
        """Close the connections of its own transport; a later ``fetch`` opens new ones."""
        if self._owns_transport:
            await self._transport.close()


def wire_for(options: FetchOptions, forbidden: AddressPredicate | None) -> Wire:
    """The transport of the crawl's HTTP fetchers: its timeouts and idle pool from
    ``options``, the address guard ``forbidden`` (None: none)."""
    return Wire(
        connect_timeout_s=options.connect_timeout_s,
        read_timeout_s=options.read_timeout_s,
        forbidden=forbidden,
        max_idle_per_origin=options.max_idle_per_origin,
    )


def _merged(base: Mapping[str, str], sent: Mapping[str, str]) -> CIMultiDict[str]:
    """``base`` in its order, each header ``sent`` replacing it (any case) or added after."""
    merged: CIMultiDict[str] = CIMultiDict(base)
    merged.update(sent)
    return merged
