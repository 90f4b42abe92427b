"""The ``impersonate`` fetcher: libcurl (curl_cffi) with a browser's TLS, HTTP/2 and headers.

For sites that refuse a client by its TLS or HTTP/2 fingerprint or by headers a browser sends
(``sec-ch-ua``, ``Sec-Fetch-*``): the whole request looks like Chrome's (``TARGET``), User-Agent
included, so ``FetchOptions.user_agent`` is not sent (robots.txt rules are still read for it).
Why and at what cost: docs/decisions/0018-strategy-ladder.md.

The guarantees of ``HttpFetcher``, kept here with its parts (the target's checks of
``fetchers.target``, the resolver's filter of ``fetchers.addresses``, the Basic auth of
``fetchers.credentials``, ``fetchers.transport.fetch_failure``):

- **timeouts**: ``connect_timeout_s``; ``read_timeout_s`` as "less than 1 byte/s for that
  long" (libcurl's low-speed limit, whole seconds); ``total_timeout_s`` for the fetch;
- **body caps**: the body as sent stops at ``max_body_bytes`` (libcurl's file-size limit, on
  the declared length and while reading); a decoded body (gzip, deflate, br, zstd are
  undone by libcurl) stops at ``max_decompressed_bytes``: both ``TooLarge``;
- **private addresses**: the host is resolved here, forbidden addresses are dropped and the
  rest pinned for libcurl (``CURLOPT_RESOLVE``), so the address connected to is one that was
  checked; a literal IP is checked as it is. ``allow_private_addresses`` turns this off;
- **redirects** are returned as they are (the crawl queues the Location); no cookie is kept;
  ``credentials`` go as Basic auth to their own origin only;
- every failure is a ``FetchError`` naming the URL, ``transient`` when a retry may help;
- the **archive** (``keeper``) gets every response returned, before ``fetch`` returns it, with
  the request headers libcurl sent (read from its debug stream, the impersonated browser's
  included) and the server's address. libcurl undoes content codings itself (zstd included,
  which ``fetchers.decoding`` cannot), so an encoded body is kept decoded and marked so
  (``Sent.decoded``; decision 0049);
- **crawl sessions** (``via``, from ``runtime/fetching/proxy_link.py``): the request goes
  through the session's proxy; the session's header profile is not sent, the impersonated
  browser's own headers are (a second browser's headers would contradict the TLS
  fingerprint). Through a proxy the proxy resolves the host, so only a literal IP is
  checked, as in ``HttpFetcher``.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field

from curl_cffi.aio import AsyncCurl
from curl_cffi.const import CurlECode, CurlHttpVersion, CurlInfo, CurlOpt
from curl_cffi.curl import CURL_WRITEFUNC_ERROR, CURLINFO_HEADER_OUT, Curl, CurlError

from crawlfleet.archive.protocols import ResponseKeeper, Sent
from crawlfleet.clock import Clock, SystemClock
from crawlfleet.errors import FetchError, ForbiddenAddress, TooLarge
from crawlfleet.fetchers.addresses import (
    AddressPredicate,
    check_literal_host,
    is_forbidden_address,
    parse_ip,
    resolve,
)
from crawlfleet.fetchers.credentials import Credentials, basic_auth
from crawlfleet.fetchers.decoding import body_too_large
from crawlfleet.fetchers.hops import Hop
from crawlfleet.fetchers.options import FetchOptions
from crawlfleet.fetchers.protocols import Via
from crawlfleet.fetchers.target import Target, http_target, url_of
from crawlfleet.fetchers.transport import fetch_failure
from crawlfleet.models import CrawlRequest, FetchResult

TARGET = "chrome146"
"""The browser build impersonated (a curl_cffi target name)."""
ENCODINGS = b"gzip, deflate, br, zstd"
"""What libcurl decodes; the impersonated Accept-Encoding header is the same list."""
_PERMANENT = frozenset(
    {CurlECode.UNSUPPORTED_PROTOCOL, CurlECode.URL_MALFORMAT, CurlECode.PEER_FAILED_VERIFICATION}
)


@dataclass(slots=True)
class _Transfer:
    """What one libcurl transfer received, filled by its callbacks."""

    header_lines: list[bytes] = field(default_factory=list)
    chunks: list[bytes] = field(default_factory=list)
    size: int = 0
    cap_bytes: int = 0
    too_large: bool = False
    request_head: bytes = b""
    """The last request head libcurl sent (its debug stream; only when archiving)."""

    def debug(self, kind: int, data: bytes) -> None:
        if kind == CURLINFO_HEADER_OUT:  # a whole head (a proxy's CONNECT, then the request)
            self.request_head = data

    def header(self, line: bytes) -> int:
        if line.startswith(b"HTTP/"):  # a new response (after a 100 or a proxy's CONNECT)
            self.header_lines.clear()
        self.header_lines.append(line)
        return len(line)

    def write(self, chunk: bytes) -> int:
        self.size += len(chunk)
        if self.size > self.cap_bytes:
            self.too_large = True
            return int(CURL_WRITEFUNC_ERROR)
        self.chunks.append(chunk)
        return len(chunk)

    def headers(self) -> dict[str, str]:
        """Response headers keyed in lower case; repeated headers joined with ``", "``."""
        headers: dict[str, str] = {}
        for raw in self.header_lines[1:]:
            name, sep, value = raw.decode("latin-1").partition(":")
            if not sep:
                continue
            key = name.strip().lower()
            value = value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        return headers

    def sent_headers(self) -> dict[str, str]:
        """The headers of ``request_head`` in their order, names as sent."""
        headers: dict[str, str] = {}
        for raw in self.request_head.decode("latin-1").split("\r\n")[1:]:
            name, sep, value = raw.partition(":")
            if sep:
                headers[name.strip()] = value.strip()
        return headers


class ImpersonateFetcher:
    """Fetches one http(s) URL per call as a browser would; a ``Fetcher``.

    ``forbidden`` decides which resolved addresses may not be connected to (default:
    ``is_forbidden_address``); not consulted when ``options.allow_private_addresses``.
    Create, use and close it in one event loop. ``keeper`` (the crawl's archive) gets every
    response returned, before ``fetch`` returns it.
    """

    def __init__(
        self,
        options: FetchOptions,
        *,
        clock: Clock | None = None,
        forbidden: AddressPredicate | None = None,
        credentials: Credentials | None = None,
        keeper: ResponseKeeper | None = None,
    ) -> None:
        self._options = options
        self._keeper = keeper
        self._clock = clock or SystemClock()
        self._credentials = credentials if credentials is not None else Credentials()
        self._forbidden = (
            None if options.allow_private_addresses else (forbidden or is_forbidden_address)
        )
        self._multi: AsyncCurl | None = None
        self._idle: list[Curl] = []

    async def fetch(self, request: CrawlRequest, *, via: Via | None = None) -> FetchResult:
        """The response to ``request``, whatever its status; a 3xx is not followed."""
        started = time.perf_counter()
        url = request.url
        try:
            async with asyncio.timeout(self._options.total_timeout_s):
                target = http_target(url)
                proxied = via is not None and via.proxy is not None
                if proxied and self._forbidden is not None:
                    check_literal_host(target.host, self._forbidden)
                pins = [] if proxied else await self._pins(target, url)
                hop = Hop.first(request)
                status, headers, body, wire = await self._transfer(hop, url, pins, via)
        except ForbiddenAddress as exc:
            raise ForbiddenAddress(f"{url}: {exc}") from None
        except FetchError:
            raise
        except (TimeoutError, ValueError) as exc:
            raise fetch_failure(exc, url, self._options.total_timeout_s) from None
        result = FetchResult(
            url=request.url,
            final_url=url,
            status=status,
            headers=headers,
            body=body,
            elapsed_s=time.perf_counter() - started,
            fetcher="impersonate",
            fetched_at=self._clock.now(),
            request=request,
        )
        if self._keeper is not None and wire is not None:
            sent, address = wire
            decoded = headers.get("content-encoding", "identity").lower() != "identity"
            kept = Sent(hop.method, sent, hop.body, body, address=address, decoded=decoded)
            await self._keeper.keep(result, kept)
        return result

    async def _pins(self, target: Target, url: str) -> list[str]:
        """``CURLOPT_RESOLVE`` entries pinning ``target``'s host to allowed addresses."""
        host, port = target.host, target.port
        if self._forbidden is None:
            return []
        if parse_ip(host) is not None:
            check_literal_host(host, self._forbidden)
            return []
        allowed = await resolve(url, host, port, self._forbidden)
        listed = ",".join(f"[{a}]" if ":" in a else a for a in allowed)
        return [f"{host}:{port}:{listed}"]

    async def _transfer(
        self, hop: Hop, url: str, pins: list[str], via: Via | None
    ) -> tuple[int, dict[str, str], bytes, tuple[dict[str, str], str | None] | None]:
        """Status, lower-case headers, the body (decoded) and, when archiving, the request
        headers sent and the server's address (None through a proxy)."""
        multi = self._multi or self._open()
        curl = self._idle.pop() if self._idle else Curl()
        transfer = _Transfer(cap_bytes=self._options.max_body_bytes)
        try:
            self._prepare(curl, hop, url, pins, transfer, via)
            try:
                await multi.add_handle(curl)
            except CurlError as exc:
                raise self._describe(exc, url, transfer) from None
            status = curl.getinfo(CurlInfo.RESPONSE_CODE)
            if not isinstance(status, int):
                raise FetchError(f"{url}: no status read", transient=True)
            wire = None
            if self._keeper is not None:
                address = curl.getinfo(CurlInfo.PRIMARY_IP)
                proxied = via is not None and via.proxy is not None
                peer = address.decode() if isinstance(address, bytes) and not proxied else None
                wire = (transfer.sent_headers(), peer or None)
        finally:
            curl.clean_handles_and_buffers()
            multi.remove_handle(curl)
            curl.reset()
            self._idle.append(curl)
        return status, transfer.headers(), b"".join(transfer.chunks), wire

    def _prepare(
        self,
        curl: Curl,
        hop: Hop,
        url: str,
        pins: list[str],
        transfer: _Transfer,
        via: Via | None,
    ) -> None:
        options = self._options
        target = url_of(url)  # as HttpFetcher sends it, without userinfo
        curl.impersonate(TARGET, default_headers=True)
        curl.setopt(CurlOpt.URL, str(target).encode())
        curl.setopt(CurlOpt.HTTP_VERSION, CurlHttpVersion.V2TLS)  # as browsers: no h2c upgrade
        curl.setopt(CurlOpt.ACCEPT_ENCODING, ENCODINGS)
        if hop.method == "HEAD":
            curl.setopt(CurlOpt.NOBODY, 1)
        elif hop.method != "GET":
            curl.setopt(CurlOpt.CUSTOMREQUEST, hop.method.encode())
        if hop.body is not None:
            curl.setopt(CurlOpt.POSTFIELDSIZE, len(hop.body))
            curl.setopt(CurlOpt.COPYPOSTFIELDS, hop.body)
        sent = hop.headers_for(target)
        auth = self._credentials.for_url(url)
        if auth:
            sent["Authorization"] = basic_auth(*auth)
        if sent:
            curl.setopt(CurlOpt.HTTPHEADER, [f"{k}: {v}".encode() for k, v in sent.items()])
        if pins:
            curl.setopt(CurlOpt.RESOLVE, pins)
        if via is not None and via.proxy is not None:
            curl.setopt(CurlOpt.PROXY, via.proxy.encode())
            if via.proxy_auth is not None:
                curl.setopt(CurlOpt.PROXYUSERPWD, ":".join(via.proxy_auth).encode())
        curl.setopt(CurlOpt.CONNECTTIMEOUT_MS, int(options.connect_timeout_s * 1000))
        curl.setopt(CurlOpt.TIMEOUT_MS, int(options.total_timeout_s * 1000))
        curl.setopt(CurlOpt.LOW_SPEED_LIMIT, 1)
        curl.setopt(CurlOpt.LOW_SPEED_TIME, max(1, math.ceil(options.read_timeout_s)))
        curl.setopt(CurlOpt.MAXFILESIZE_LARGE, options.max_body_bytes)
        curl.setopt(CurlOpt.HEADERFUNCTION, transfer.header)
        if self._keeper is not None:  # the request head as sent, for the archive
            curl.setopt(CurlOpt.VERBOSE, 1)
            curl.setopt(CurlOpt.DEBUGFUNCTION, transfer.debug)
        curl.setopt(CurlOpt.WRITEFUNCTION, lambda chunk: self._write(transfer, chunk))

    def _write(self, transfer: _Transfer, chunk: bytes) -> int:
        """Body bytes as decoded: the cap is the decompressed one when the body was encoded."""
        if transfer.size == 0 and _encoded(transfer.header_lines):
            transfer.cap_bytes = self._options.max_decompressed_bytes
        return transfer.write(chunk)

    def _describe(self, exc: CurlError, url: str, transfer: _Transfer) -> FetchError:
        options = self._options
        code = exc.code
        detail = str(exc).partition(") ")[2].split(". See ")[0] or str(exc)
        if transfer.too_large:
            return TooLarge(f"{url}: body exceeds {transfer.cap_bytes} bytes (decoded)")
        if code == CurlECode.FILESIZE_EXCEEDED:
            return body_too_large(url, options.max_body_bytes)
        if code == CurlECode.OPERATION_TIMEDOUT:
            return FetchError(f"timeout fetching {url}: {detail}")
        if code == CurlECode.COULDNT_RESOLVE_HOST:
            return FetchError(f"DNS lookup failed ({url}): {detail}")
        if code == CurlECode.COULDNT_CONNECT:
            return FetchError(f"cannot connect ({url}): {detail}")
        return FetchError(f"{url}: {detail}", transient=code not in _PERMANENT)

    def _open(self) -> AsyncCurl:
        self._multi = AsyncCurl()
        return self._multi

    async def close(self) -> None:
        """Close the connections and handles; a later ``fetch`` opens new ones."""
        idle, self._idle = self._idle, []
        for curl in idle:
            curl.close()
        if self._multi is not None:
            multi, self._multi = self._multi, None
            await multi.close()  # type: ignore[no-untyped-call]


def _encoded(header_lines: list[bytes]) -> bool:
    for line in header_lines:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-encoding":
            return value.strip().lower() not in (b"", b"identity")
    return False
