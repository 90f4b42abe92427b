"""The values that flow between the parts of a crawl.

They are plain dataclasses so that every runtime (asyncio, Celery) and every store (SQLite,
Redis, PostgreSQL) can turn them into JSON with ``to_dict`` / ``from_dict``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any
from urllib.parse import urlencode

import orjson

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"})
"""The HTTP methods a request may use."""
FORM_CONTENT_TYPE = "application/x-www-form-urlencoded"
JSON_CONTENT_TYPE = "application/json"
DEFAULT_MAX_CONTEXT_BYTES = 16 * 1024
"""The default of the ``max_context_bytes`` setting: one link's context, as JSON."""


@dataclass(frozen=True, slots=True)
class CrawlRequest:
    """A URL waiting in (or handed out by) the frontier, as it is requested.

    ``domain`` is the politeness key (host or registrable domain, per settings);
    ``priority``: higher is served first within a domain; ``attempt`` counts earlier failed
    attempts (0 on the first try); ``fetcher`` names the fetcher kind (``http``, ``browser``).

    The payload, stored with the request in every store: ``data`` is the context its page's
    parser reads (``Response.context``; JSON-serializable), ``method``, ``body`` (text, sent
    UTF-8 encoded: a form or JSON body; binary bodies are not supported) and ``headers``
    (sent over the fetcher's own). ``fingerprint`` covers the method, the URL's dedup key and
    the body (``urls.request_fingerprint``), not ``data`` nor ``headers``; rows written before
    decision 0040 hold canonical URLs, which are valid request URLs too.
    """

    url: str
    fingerprint: str
    domain: str
    depth: int = 0
    priority: int = 0
    attempt: int = 0
    fetcher: str = "http"
    parent: str | None = None
    hops: int = 0
    data: dict[str, Any] = field(default_factory=dict)
    method: str = "GET"
    body: str = ""
    headers: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CrawlRequest:
        """The request of ``to_dict``'s output; entries written before the payload fields
        existed read with their defaults."""
        return cls(**data)


def _request_builder() -> Callable[..., CrawlRequest]:
    new = object.__new__
    (
        set_url,
        set_fingerprint,
        set_domain,
        set_depth,
        set_priority,
        set_attempt,
        set_fetcher,
        set_parent,
        set_hops,
        set_data,
        set_method,
        set_body,
        set_headers,
    ) = (getattr(CrawlRequest, f.name).__set__ for f in fields(CrawlRequest))

    def link_request(
        url: str,
        fingerprint: str,
        domain: str,
        depth: int,
        priority: int,
        fetcher: str,
        parent: str | None,
        data: dict[str, Any],
        method: str,
        body: str,
        headers: dict[str, str],
    ) -> CrawlRequest:
        """``CrawlRequest(...)`` for a link's first try (``frontier/requests.py``) at less
        than half the cost (1.0 µs, not 2.5: a frozen dataclass sets each field through
        ``object.__setattr__``); a page offers ~30 (decision 0058). Sets the slots directly."""
        request: CrawlRequest = new(CrawlRequest)
        set_url(request, url)
        set_fingerprint(request, fingerprint)
        set_domain(request, domain)
        set_depth(request, depth)
        set_priority(request, priority)
        set_attempt(request, 0)
        set_fetcher(request, fetcher)
        set_parent(request, parent)
        set_hops(request, 0)
        set_data(request, data)
        set_method(request, method)
        set_body(request, body)
        set_headers(request, headers)
        return request

    return link_request


link_request = _request_builder()


@dataclass(frozen=True, slots=True)
class Lease:
    """A request handed to one worker until ``expires_at`` (epoch seconds).

    ``token`` identifies this hand-out: completing or releasing with a token that is no longer
    current (the lease expired and the request was handed out again) is refused.
    """

    request: CrawlRequest
    token: str
    expires_at: float


@dataclass(frozen=True, slots=True)
class Link:
    """A link found on a page, or a request a parser makes, before the frontier serializes it.

    ``data`` is the context the target page's parser reads (``Response.context``): a small
    JSON-serializable dict (at most ``max_context_bytes`` as JSON). ``method``, ``body`` and
    ``headers`` as in ``CrawlRequest``; ``Link.post`` builds a form or JSON POST.
    """

    url: str
    priority: int = 0
    fetcher: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)
    method: str = "GET"
    body: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.method == "GET":  # nearly every link: nothing to check or normalize
            return
        method = self.method.upper()
        if method not in METHODS:
            raise ValueError(f"unsupported HTTP method {self.method!r} (one of {sorted(METHODS)})")
        object.__setattr__(self, "method", method)

    @classmethod
    def post(
        cls,
        url: str,
        *,
        form: Mapping[str, Any] | None = None,
        json: Any = None,
        data: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        priority: int = 0,
        fetcher: str | None = None,
    ) -> Link:
        """A POST of ``form`` (URL-encoded; a list value repeats its name) or of ``json``
        (keys sorted, so equal documents make one fingerprint); give at most one."""
        if form is not None and json is not None:
            raise ValueError("give a form or a JSON body, not both")
        sent = dict(headers or {})
        body = ""
        if form is not None:
            body = urlencode(list(form.items()), doseq=True)
            sent.setdefault("Content-Type", FORM_CONTENT_TYPE)
        elif json is not None:
            body = orjson.dumps(json, option=orjson.OPT_SORT_KEYS).decode()
            sent.setdefault("Content-Type", JSON_CONTENT_TYPE)
        return cls(url, priority, fetcher, dict(data or {}), "POST", body, sent)

    @property
    def identity(self) -> tuple[str, str, str]:
        """What makes two links one request: method, URL and body."""
        return (self.method, self.url, self.body)


def _link_builder() -> Callable[[str, int, str | None], Link]:
    new = object.__new__
    set_url, set_priority, set_fetcher, set_data, set_method, set_body, set_headers = (
        getattr(Link, name).__set__
        for name in ("url", "priority", "fetcher", "data", "method", "body", "headers")
    )

    def found_link(url: str, priority: int = 0, fetcher: str | None = None) -> Link:
        """``Link(url, priority, fetcher)``, a GET found on a page, at half the cost (0.5 µs,
        not 1.0: a frozen dataclass sets each field through ``object.__setattr__``); a page's
        ~29 links are built with it (decision 0028). Sets the slots directly."""
        link: Link = new(Link)
        set_url(link, url)
        set_priority(link, priority)
        set_fetcher(link, fetcher)
        set_data(link, {})
        set_method(link, "GET")
        set_body(link, "")
        set_headers(link, {})
        return link

    return found_link


found_link = _link_builder()


@dataclass(frozen=True, slots=True)
class Route:
    """Which crawl session, proxy (by id, never its URL) and tier a fetch went through."""

    session_id: str
    proxy_id: str
    tier: int


@dataclass(slots=True)
class FetchResult:
    """What a fetcher got for one request.

    ``headers`` keys are lower case. ``redirects`` lists every URL visited before ``final_url``
    (the request URL first). ``elapsed_s`` is wall time from start to the last body byte;
    ``fetched_at`` is when the response arrived (epoch seconds). ``request`` is the request
    fetched, when the fetcher had one: its ``data`` is the parser's ``Response.context``.
    ``route``: the crawl session it went through (``runtime/fetching/proxy_link.py``), if any.
    """

    url: str
    final_url: str
    status: int
    headers: dict[str, str]
    body: bytes
    elapsed_s: float
    redirects: tuple[str, ...] = ()
    fetcher: str = "http"
    fetched_at: float = 0.0
    request: CrawlRequest | None = None
    route: Route | None = None
    screenshot: str | None = None
    """A picture of a failed page (status >= 400) the browser fetcher saved, if asked to."""
    cookies: dict[str, str] | None = None
    """The crawl session's cookie jar after the fetch, from a fetcher that keeps the jar
    itself (the browser: cookies its pages set by header or by script); None otherwise."""

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

    @property
    def is_html(self) -> bool:
        ct = self.content_type
        return ct in ("text/html", "application/xhtml+xml") or (
            not ct and self.body.lstrip()[:15].lower().startswith((b"<!doctype html", b"<html"))
        )

    @property
    def encoding(self) -> str:
        ctype = self.headers.get("content-type", "")
        for part in ctype.split(";")[1:]:
            key, _, value = part.strip().partition("=")
            if key.lower() == "charset" and value:
                return value.strip("\"' ").lower()
        return "utf-8"

    @property
    def text(self) -> str:
        """The body decoded with the declared charset (UTF-8 by default); bad bytes replaced."""
        try:
            return self.body.decode(self.encoding, errors="replace")
        except LookupError:
            return self.body.decode("utf-8", errors="replace")


@dataclass(slots=True)
class Item:
    """One record a parser produced.

    ``key`` is the stable identity within ``type`` (a product id, a page's URL); when None
    the pipeline keys the item by its content hash. ``fetched_at`` (epoch seconds) is when the
    page it came from was fetched: the version the sinks keep the newest of (None: the time
    the sink writes it).
    """

    type: str
    data: dict[str, Any]
    key: str | None = None
    url: str = ""
    fetched_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "key": self.key, **self.data}


@dataclass(frozen=True, slots=True)
class Revisit:
    """What a parser asks for its page's next visit (yield it like an item).

    ``priority`` raises the page's place in its queue when it is due again (its items matter
    more); ``after_s`` replaces the interval of the crawl's recrawl rules for this visit.
    """

    priority: int = 0
    after_s: float | None = None


@dataclass(slots=True)
class ParseResult:
    """Items and links a parser got from one response, and its ``Revisit`` wish if any.

    ``unmet``: the parts of the parser's expectations the page missed (``parsing/expect.py``;
    empty: met, or none set).
    """

    items: list[Item] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    revisit: Revisit | None = None
    unmet: tuple[str, ...] = ()


FETCHER_KINDS = ("http", "impersonate", "browser", "file")
"""Every fetcher kind a request may name; which of them a runner serves is its own choice."""
