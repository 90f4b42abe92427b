"""The archive's ports: what a fetcher hands over to be kept, and the index of captures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from crawlfleet.models import FetchResult

WARC_SUFFIX = ".warc.gz"
"""How every file of an archive ends."""
S3_SCHEME = "s3://"
"""How an archive in object storage is named: ``s3://bucket/prefix``."""


@dataclass(frozen=True, slots=True)
class Sent:
    """What went over the wire for a ``FetchResult``, beyond what the result says.

    ``request_headers``: the headers sent with the request of the last hop, in their order;
    ``body``: the response body as the server sent it (content codings not undone; the
    transfer coding is); ``truncated``: the fetch kept only the first bytes of the body;
    ``address``: the server's IP address (None: unknown, e.g. through a proxy); ``decoded``:
    ``body`` has its content codings undone already (a fetcher that cannot have the bytes as
    sent: libcurl decodes), which the record says.
    """

    method: str
    request_headers: Mapping[str, str]
    request_body: bytes | None
    body: bytes
    truncated: bool = False
    address: str | None = None
    decoded: bool = False


class ResponseKeeper(Protocol):
    """Keeps every response a fetcher had from the network (the crawl's archive).

    ``keep`` runs before the fetcher returns ``result``; it raises ``StateError`` when the
    archive cannot be written (the crawl stops rather than lose captures silently).
    """

    async def keep(self, result: FetchResult, sent: Sent) -> None: ...


@dataclass(frozen=True, slots=True)
class Capture:
    """One record of the archive: where it is and what it holds.

    ``kind``: ``response`` or ``revisit`` (a page unchanged since an earlier capture, whose
    digest it repeats); ``at``: when it was fetched (epoch seconds); ``digest``: the payload's
    ``sha1:`` base32 digest; ``file`` is relative to the archive's root; ``offset`` and
    ``length`` are those of the record's gzip member in it.
    """

    url: str
    at: float
    status: int
    digest: str
    file: str
    offset: int
    length: int
    kind: str = "response"
    mime: str = ""


class CaptureIndex(Protocol):
    """Every capture of a crawl's archive, by URL (SQLite embedded, PostgreSQL distributed).

    ``add`` makes captures findable (written through before it returns); ``latest``: the
    newest ``response`` capture of ``url`` (None: never archived in full); ``find``: the
    captures of ``url`` (None: all), by URL then time; ``root``: where the files are (None
    until ``set_root``); ``forget_files``: drop the captures of pruned files, returning how
    many. Failures are ``StateError``s naming the index.
    """

    @property
    def root(self) -> str | None: ...

    def set_root(self, root: str) -> None: ...

    def forget_files(self, names: Sequence[str]) -> int: ...

    def add(self, captures: Sequence[Capture]) -> None: ...

    def latest(self, url: str) -> Capture | None: ...

    def find(self, url: str | None = None, *, limit: int | None = None) -> list[Capture]: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Archived:
    """A ``response`` or ``revisit`` record read back (``kind``; ``damaged``: a response
    whose payload fails its digest, cut short).

    ``headers``: the HTTP headers, names in lower case; ``body``: the payload as the server
    sent it (content codings not undone; empty in a revisit); ``context``: the parser context
    of the request (``Response.context``); ``page``: fetched by a crawl step (not a robots.txt
    or sitemap read); ``at``: the WARC-Date (epoch seconds).
    """

    url: str
    kind: str
    status: int
    headers: dict[str, str]
    body: bytes
    at: float
    digest: str
    page: bool = True
    context: dict[str, Any] = field(default_factory=dict)
