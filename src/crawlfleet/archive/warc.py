"""Writing WARC/1.1 files: one gzip member a record, a ``warcinfo`` first, rolled at a size.

Records are serialized here (``warc_record``: the WARC head is a few lines of text) and each
compressed into one gzip member by ISA-L (``isal``) at level 0: 68 µs of CPU for a 21 KB
page's two records, digest and index row where fastwarc's record objects took 127 µs and
warcio's own gzip 510 µs (decision 0049). A record whose payload the server compressed
(``Content-Encoding``) goes into a member of stored blocks instead (decision 0064). fastwarc
reads them back (``archive/reading.py``), warcio in the tests.
Records carry a ``WARC-Payload-Digest`` (what revisits and replay tools use), no
``WARC-Block-Digest``. A file is named ``<crawl>-<UTC time>-<host>-<pid>-<sequence>.warc.gz``,
so two processes (or one process's successive files) never write to one file. A call's
records are compressed into memory and then appended with one ``write``: a process killed
mid-way leaves whole records plus at most one cut member at the end, which readers skip.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import os
import random
import socket
import struct
import time
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import BinaryIO

from isal import isal_zlib

from crawlfleet.errors import StateError

DEFAULT_FILE_BYTES = 1_000_000_000
COMPRESSION_LEVEL = 0
"""ISA-L's fastest level: 27.5 µs for a 21 KB page (level 1: 34.5 µs, and 3 µs more for
setting up its tables on a small record), members 21 % larger than level 1's on those pages
and 7.5 % on 90 KB documentation pages (decision 0049)."""
_GZIP_WBITS = 31
_GZIP_HEAD = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
"""A gzip member's header: deflate, no flags, no time, no extra fields, unknown OS."""
_STORED_BLOCK = 65_535
_random = random.Random()
_UUID4_CLEAR = ~((0xF000 << 64) | (0xC000 << 48))
_UUID4_SET = (0x4000 << 64) | (0x8000 << 48)
REVISIT_PROFILE = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
_HOP_HEADERS = frozenset({"transfer-encoding"})
"""Headers describing how the bytes travelled, which the payload no longer reflects."""
SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})
"""Request headers whose values never go into the archive."""
REDACTED = "[redacted]"
_BODY_HEADERS = frozenset({"content-encoding", "content-length"})
"""Headers describing the server's body, which a rendered DOM or a decoded body is not."""
_END = b"\r\n\r\n"


def payload_digest(body: bytes) -> str:
    """The ``sha1:`` base32 digest WARC tools expect in ``WARC-Payload-Digest``."""
    return "sha1:" + base64.b32encode(hashlib.sha1(body).digest()).decode()


def gzip_member(record: bytes) -> bytes:
    """``record`` deflated (``COMPRESSION_LEVEL``) into one gzip member."""
    return isal_zlib.compress(record, COMPRESSION_LEVEL, _GZIP_WBITS)


def stored_member(record: bytes) -> bytes:
    """``record`` in one gzip member of deflate's stored (uncompressed) blocks: for a record
    whose payload the server compressed already, where deflating again costs 11 µs for a
    4.5 KB gzip body and saves nothing; this costs 1.4 µs (decision 0064)."""
    size = len(record)
    view = memoryview(record)
    parts: list[bytes | memoryview] = [_GZIP_HEAD]
    for start in range(0, max(size, 1), _STORED_BLOCK):
        block = view[start : start + _STORED_BLOCK]
        last = start + _STORED_BLOCK >= size
        parts.append(struct.pack("<BHH", last, len(block), len(block) ^ 0xFFFF))
        parts.append(block)
    parts.append(struct.pack("<II", isal_zlib.crc32(record), size & 0xFFFFFFFF))
    return b"".join(parts)


@functools.lru_cache(maxsize=4)
def _second(whole_s: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole_s))


def warc_date(at: float) -> str:
    """``at`` (epoch seconds) as a WARC/1.1 date, to the microsecond."""
    whole_s = int(at)
    return f"{_second(whole_s)}.{int((at - whole_s) * 1_000_000):06d}Z"


def record_id() -> str:
    """A fresh ``WARC-Record-ID``: a random (version 4) UUID URN in angle brackets.

    ``random``, not ``os.urandom``: an id, not a secret (``uuid4`` was a syscall a record).
    """
    h = f"{(_random.getrandbits(128) & _UUID4_CLEAR) | _UUID4_SET:032x}"
    return f"<urn:uuid:{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}>"


def warc_fields(fields: Sequence[tuple[str, str]]) -> str:
    """``fields`` as the named-field lines of a WARC head; ``ValueError`` for a value that
    holds a line break (it would end the head early)."""
    text = "".join([f"{name}: {value}\r\n" for name, value in fields])
    if text.count("\n") != len(fields) or text.count("\r") != len(fields):
        raise ValueError(f"a WARC field value holds a line break: {fields!r}")
    return text


def warc_record(kind: str, rid: str, date: str, fields: str, *block: bytes) -> bytes:
    """One WARC/1.1 record: ``kind`` (``WARC-Type``), its id, date and ``fields`` (from
    ``warc_fields``), then its block, the concatenation of ``block``."""
    length = sum(map(len, block))
    head = (
        f"WARC/1.1\r\nWARC-Type: {kind}\r\nWARC-Record-ID: {rid}\r\nWARC-Date: {date}\r\n"
        f"{fields}Content-Length: {length}\r\n\r\n"
    )
    return b"".join((head.encode(), *block, _END))


@functools.lru_cache(maxsize=128)
def _status_line(status: int) -> str:
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = ""
    return f"HTTP/1.1 {status} {reason}".rstrip()


def http_response_head(status: int, headers: Mapping[str, str], *, recoded: bool = False) -> bytes:
    """The status line and headers of a response as a WARC block starts.

    The payload is kept as sent but without its transfer coding (the wire undid it): the
    ``Transfer-Encoding`` header is renamed ``X-Crawlfleet-Was-Transfer-Encoding`` so that a
    reader does not undo it again. A ``recoded`` payload (the browser's DOM, a body libcurl
    decoded) has neither the server's coding nor its length: those headers are renamed too.
    """
    lines = [_status_line(status)]
    for name, value in headers.items():
        if name in _HOP_HEADERS or (recoded and name in _BODY_HEADERS):
            name = f"x-crawlfleet-was-{name}"
        lines.append(f"{name}: {value}")
    lines.append("\r\n")
    return "\r\n".join(lines).encode("latin-1", "replace")


def http_request_head(
    method: str, target: str, host: str, headers: Mapping[str, str], body: bytes | None
) -> bytes:
    """The request line and headers of a request as sent (``Host`` first), less its secrets.

    The values of ``SECRET_HEADERS`` are replaced by ``REDACTED`` and a body is left out
    (a login form carries a password): ``Content-Length`` still says how long it was.
    """
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}"]
    for name, value in headers.items():
        lowered = name.lower()
        if lowered == "host":
            continue
        lines.append(f"{name}: {REDACTED if lowered in SECRET_HEADERS else value}")
    if body:
        lines.append(f"Content-Length: {len(body)}")
        lines.append("X-Crawlfleet-Body: left out")
    lines.append("\r\n")
    return "\r\n".join(lines).encode("latin-1", "replace")


@dataclass(frozen=True, slots=True)
class Written:
    """Where a record went: ``file`` relative to the archive's root, its gzip member's
    ``offset`` and ``length``."""

    file: str
    offset: int
    length: int


class WarcFiles:
    """Appends records to a rolling series of WARC files under ``directory``; not thread-safe.

    A file past ``max_file_bytes`` is closed before the next record (a record is never
    split); every file starts with a ``warcinfo`` record naming the crawl. ``on_closed`` gets
    each finished file (``archive/s3.py`` uploads it).
    """

    def __init__(
        self,
        directory: Path,
        *,
        crawl_id: str,
        max_file_bytes: int = DEFAULT_FILE_BYTES,
        software: str = "crawlfleet",
        on_closed: Callable[[Path], None] | None = None,
    ) -> None:
        self._on_closed = on_closed
        self.directory = directory
        self._crawl_id = crawl_id
        self._max_file_bytes = max_file_bytes
        self._software = software
        self._host = socket.gethostname().replace("-", "_") or "host"
        self._sequence = 0
        self._file: BinaryIO | None = None
        self._name = ""
        self._size = 0
        self.closed_files: list[Path] = []
        """Every file finished so far, oldest first."""

    def write(self, records: Sequence[bytes], *, stored: Container[int] = ()) -> list[Written]:
        """Append ``records`` (from ``warc_record``; a gzip member each) to the current file,
        in one ``write``, handed to the OS before this returns. The records at the positions
        ``stored`` hold compressed payloads: their members are not deflated again."""
        if self._file is None or self._size >= self._max_file_bytes:
            self._roll()
        assert self._file is not None  # _roll opened it
        members = [
            stored_member(r) if n in stored else gzip_member(r) for n, r in enumerate(records)
        ]
        places = []
        offset = self._size
        for member in members:
            places.append(Written(self._name, offset, len(member)))
            offset += len(member)
        data = members[0] if len(members) == 1 else b"".join(members)
        try:
            written = self._file.write(data)  # unbuffered: a killed process keeps it
        except OSError as exc:
            raise StateError(f"cannot write the archive file {self._name}: {exc}") from None
        if written != len(data):  # a full disk (a regular file's write is otherwise whole)
            raise StateError(f"cannot write the archive file {self._name}: short write")
        self._size = offset
        return places

    def close(self) -> None:
        """Finish the current file (nothing to do when none was opened)."""
        if self._file is None:
            return
        file, self._file = self._file, None
        file.close()
        path = self.directory / self._name
        self.closed_files.append(path)
        if self._on_closed is not None:
            self._on_closed(path)

    def _roll(self) -> None:
        self.close()
        stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime())
        while True:  # a name taken (another writer of this process, this second): the next one
            name = f"{self._crawl_id}-{stamp}-{self._host}-{os.getpid()}-{self._sequence:05d}"
            name += ".warc.gz"
            self._sequence += 1
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
                self._file = (self.directory / name).open("xb", buffering=0)
                break
            except FileExistsError:
                continue
            except OSError as exc:
                where = self.directory / name
                raise StateError(f"cannot create the archive file {where}: {exc}") from None
        self._name, self._size = name, 0
        info = (
            f"software: {self._software}\r\nformat: WARC File Format 1.1\r\n"
            f"hostname: {socket.gethostname()}\r\nx-crawlfleet-crawl-id: {self._crawl_id}\r\n"
        ).encode()
        fields = warc_fields([("WARC-Filename", name), ("Content-Type", "application/warc-fields")])
        self.write([warc_record("warcinfo", record_id(), warc_date(time.time()), fields, info)])
