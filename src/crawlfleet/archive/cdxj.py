"""CDXJ lines (the index format of pywb and other replay tools) for captures.

A line: the URL's SURT key (host labels reversed, lower case, ``)`` before the path), the
14-digit UTC capture time, then a JSON object (url, mime, status, digest, length, offset,
filename). A revisit's mime is ``warc/revisit``, as pywb writes it.
"""

from __future__ import annotations

import time
from urllib.parse import urlsplit

import orjson

from crawlfleet.archive.protocols import Capture


def surt(url: str) -> str:
    """``http://www.Example.com:8080/a?b`` -> ``com,example,www:8080)/a?b``."""
    parts = urlsplit(url)
    host = ",".join(reversed((parts.hostname or "").lower().split(".")))
    if parts.port is not None:
        host += f":{parts.port}"
    path = parts.path or "/"
    return f"{host}){path}" + (f"?{parts.query}" if parts.query else "")


def cdxj_line(capture: Capture) -> str:
    """One CDXJ line for ``capture`` (no newline)."""
    stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime(capture.at))
    fields = {
        "url": capture.url,
        "mime": "warc/revisit" if capture.kind == "revisit" else capture.mime or "unk",
        "status": str(capture.status),
        "digest": capture.digest,
        "length": str(capture.length),
        "offset": str(capture.offset),
        "filename": capture.file,
    }
    return f"{surt(capture.url)} {stamp} {orjson.dumps(fields).decode()}"


def cdxj_lines(captures: list[Capture]) -> list[str]:
    """The lines of ``captures``, sorted as replay tools expect (by key, then time)."""
    return sorted(cdxj_line(capture) for capture in captures)
