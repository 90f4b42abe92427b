"""The character encoding of a fetched page, found as a browser does (HTML5 §13.2.3).

In order: a byte order mark; the ``charset`` of the ``Content-Type`` header; a prescan of the
first 1024 bytes for ``<meta charset>`` or ``<meta http-equiv="Content-Type" content=...>``
(HTML only); then, for a body that is not valid UTF-8, a detector (charset-normalizer, run on
the first 64 KiB: the choice and its figures are in docs/reliability.md). Labels are read as
the WHATWG Encoding Standard reads them (``iso-8859-1`` is windows-1252, ``shift_jis`` is
windows-31j); a label Python does not know is ignored, as a browser ignores it.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

from crawlfleet.models import FetchResult

PRESCAN_BYTES = 1024
DETECT_BYTES = 64 * 1024
FALLBACK = "cp1252"

_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
)
# WHATWG labels whose decoder is not Python's codec of the same name.
_WHATWG = {
    **dict.fromkeys(
        ("ascii", "us-ascii", "iso-8859-1", "iso8859-1", "iso_8859-1", "latin1", "l1", "cp819",
         "ibm819", "windows-1252", "x-cp1252"),
        "cp1252",
    ),
    **dict.fromkeys(("shift_jis", "shift-jis", "sjis", "x-sjis", "ms_kanji", "windows-31j",
                     "csshiftjis"), "cp932"),
    **dict.fromkeys(("gb2312", "gbk", "x-gbk", "chinese", "csgb2312", "gb_2312-80"), "gb18030"),
    **dict.fromkeys(("euc-kr", "ks_c_5601-1987", "korean", "windows-949"), "cp949"),
    **dict.fromkeys(("iso-8859-9", "latin5", "l5", "windows-1254"), "cp1254"),
    **dict.fromkeys(("tis-620", "iso-8859-11", "windows-874"), "cp874"),
    "x-user-defined": "cp1252",
}  # fmt: skip
_META = re.compile(rb"<meta[\s/]([^>]*)>?", re.IGNORECASE)
_COMMENT = re.compile(rb"<!--.*?(?:-->|$)", re.DOTALL)
_ATTR = re.compile(rb"""([^\s/>=]+)\s*(?:=\s*("[^"]*"|'[^']*'|[^\s>]*))?""")
_CHARSET_IN_CONTENT = re.compile(rb"""charset\s*=\s*["']?([^\s"';]+)""", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Encoding:
    """A Python codec name and where it came from (``bom``, ``header``, ``meta``, ``detected``,
    ``default``)."""

    codec: str
    source: str


def codec_for(label: str) -> str | None:
    """The Python codec a browser would use for an encoding label, or None if unknown."""
    name = label.strip().strip("\"'").lower()
    if not name:
        return None
    name = _WHATWG.get(name, name)
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None


def header_charset(content_type: str | None) -> str | None:
    """The ``charset`` parameter of a ``Content-Type`` value, if any."""
    for part in (content_type or "").split(";")[1:]:
        key, _, value = part.strip().partition("=")
        if key.strip().lower() == "charset" and value.strip():
            return value.strip().strip("\"' ")
    return None


def prescan(head: bytes) -> str | None:
    """The codec a ``<meta>`` in the first 1024 bytes declares (HTML5 prescan, simplified)."""
    head = _COMMENT.sub(b"", head[:PRESCAN_BYTES])
    for match in _META.finditer(head):
        attrs: dict[bytes, bytes] = {}
        for name, value in _ATTR.findall(match[1]):
            attrs.setdefault(name.lower(), value.strip(b"\"'"))
        label = attrs.get(b"charset")
        if label is None and attrs.get(b"http-equiv", b"").lower() == b"content-type":
            found = _CHARSET_IN_CONTENT.search(attrs.get(b"content", b""))
            label = found[1] if found else None
        codec = codec_for(label.decode("ascii", "replace")) if label else None
        if codec is not None:
            # A page cannot declare UTF-16 in bytes it could be read from as ASCII.
            return "utf-8" if codec.startswith("utf-16") else codec
    return None


def detect(body: bytes) -> str | None:
    """A guess from the bytes themselves (charset-normalizer), or None."""
    from charset_normalizer import from_bytes

    best = from_bytes(body[:DETECT_BYTES]).best()
    return codec_for(best.encoding) if best is not None else None


def sniff(body: bytes, content_type: str | None, *, html: bool = True) -> Encoding:
    """The encoding to decode ``body`` with (see the module docstring for the order)."""
    for bom, bom_codec in _BOMS:
        if body.startswith(bom):
            return Encoding(bom_codec, "bom")
    declared = header_charset(content_type)
    codec = codec_for(declared) if declared else None
    if codec is not None:
        return Encoding(codec, "header")
    if html:
        codec = prescan(body)
        if codec is not None:
            return Encoding(codec, "meta")
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        codec = detect(body)
        return Encoding(codec or FALLBACK, "detected" if codec else "default")
    return Encoding("utf-8", "default")


def decode(body: bytes, content_type: str | None, *, html: bool = True) -> str:
    """``body`` as text in its sniffed encoding; a BOM is dropped, bad bytes replaced."""
    return _decode_as(body, sniff(body, content_type, html=html))


def _decode_as(body: bytes, encoding: Encoding) -> str:
    if encoding.source == "bom":
        body = body[3:] if encoding.codec == "utf-8" else body[2:]
    return body.decode(encoding.codec, errors="replace")


def text_of(result: FetchResult) -> str:
    """A fetched body as text: ``decode`` with the response's ``Content-Type``."""
    return decode(result.body, result.headers.get("content-type"), html=result.is_html)


def html_input(result: FetchResult) -> str | bytes:
    """What to hand lexbor for a fetched body: the body itself when it is UTF-8 without a BOM,
    else the text ``text_of`` gives (sniffed once). lexbor reads bytes as UTF-8 and replaces
    a bad sequence as ``decode`` does; a decode, and selectolax's encode of the text back to
    UTF-8, cost ~40 µs on a 28 KB page (decision 0028)."""
    encoding = sniff(result.body, result.headers.get("content-type"), html=result.is_html)
    if encoding.codec == "utf-8" and encoding.source != "bom":
        return result.body
    return _decode_as(result.body, encoding)
