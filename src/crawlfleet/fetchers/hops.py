"""What one hop of a fetch sends: the request's method, body and headers, redirect by redirect.

After a 301, 302 or 303 a POST (any method but GET and HEAD after a 303) becomes a GET
without its body or ``Content-Type``, as browsers do; a 307 or 308 keeps method and body. The
request's own headers go to its own origin only: a redirect to another origin does not
carry them (they may hold a token).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from yarl import URL

from crawlfleet.models import CrawlRequest

_BODY_HEADERS = frozenset({"content-type", "content-length"})
Origin = tuple[str, str | None, int | None]


def origin_of(url: URL) -> Origin:
    """Scheme, host and port (the default port filled in); for any URL, absolute or not."""
    return (url.scheme, url.host, url.port)


@dataclass(frozen=True, slots=True)
class Hop:
    """The method, body and headers of one hop, and the origin the headers belong to."""

    method: str
    body: bytes | None
    origin: Origin | None
    """Where ``headers`` may go (None: there are none to send)."""
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def first(cls, request: CrawlRequest) -> Hop:
        body = request.body.encode("utf-8") if request.body else None
        if not request.headers:  # most requests: no URL to parse for an origin
            return cls(request.method, body, None)
        return cls(request.method, body, origin_of(URL(request.url)), dict(request.headers))

    def headers_for(self, target: URL) -> dict[str, str]:
        """The request headers to send to ``target`` (a fresh dict)."""
        if not self.headers:
            return {}
        return dict(self.headers) if origin_of(target) == self.origin else {}

    def after(self, status: int) -> Hop:
        """The hop that follows a redirect with ``status``."""
        to_get = (status == 303 and self.method not in ("GET", "HEAD")) or (
            status in (301, 302) and self.method == "POST"
        )
        if not to_get:
            return self
        kept = {k: v for k, v in self.headers.items() if k.lower() not in _BODY_HEADERS}
        return replace(self, method="GET", body=None, headers=kept)
