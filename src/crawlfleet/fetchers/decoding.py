"""Undoing Content-Encoding (gzip, deflate, br) with a cap on the decompressed size.

Each decoder asks for at most ``cap + 1`` bytes of output, so a compression bomb is refused
after producing about ``cap`` bytes, never its full expansion.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import brotli

from crawlfleet.errors import FetchError, TooLarge

_GZIP_WBITS = 16 + zlib.MAX_WBITS
_ZLIB_WBITS = zlib.MAX_WBITS
_RAW_DEFLATE_WBITS = -zlib.MAX_WBITS


class _CapExceeded(Exception):
    """Decoding produced more than the cap."""


def _inflate(data: bytes, wbits: int, cap_bytes: int) -> bytes:
    decompressor = zlib.decompressobj(wbits)
    out = decompressor.decompress(data, cap_bytes + 1)
    if decompressor.unconsumed_tail:
        raise _CapExceeded
    out += decompressor.flush()
    if len(out) > cap_bytes:
        raise _CapExceeded
    return out


def _gunzip(data: bytes, cap_bytes: int) -> bytes:
    return _inflate(data, _GZIP_WBITS, cap_bytes)


def _deflate(data: bytes, cap_bytes: int) -> bytes:
    # "deflate" is meant to be zlib-wrapped (RFC 9110) but some servers send raw deflate.
    has_zlib_header = len(data) >= 2 and data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0
    return _inflate(data, _ZLIB_WBITS if has_zlib_header else _RAW_DEFLATE_WBITS, cap_bytes)


def _unbrotli(data: bytes, cap_bytes: int) -> bytes:
    decompressor = brotli.Decompressor()
    out = decompressor.process(data, output_buffer_limit=cap_bytes + 1)
    if len(out) > cap_bytes or not (
        decompressor.is_finished() or decompressor.can_accept_more_data()
    ):
        raise _CapExceeded
    return bytes(out)


_DECODERS: dict[str, Callable[[bytes, int], bytes]] = {
    "gzip": _gunzip,
    "x-gzip": _gunzip,
    "deflate": _deflate,
    "br": _unbrotli,
}


def decode_body(body: bytes, content_encoding: str, *, cap_bytes: int, url: str) -> bytes:
    """``body`` with its content codings undone, last applied first.

    Returns ``body`` unchanged when any coding is unknown. Raises ``TooLarge`` past
    ``cap_bytes`` and a non-transient ``FetchError`` for corrupt data.
    """
    codings = [c.strip().lower() for c in content_encoding.split(",")]
    codings = [c for c in codings if c and c != "identity"]
    if not all(c in _DECODERS for c in codings):
        return body
    for coding in reversed(codings):
        try:
            body = _DECODERS[coding](body, cap_bytes)
        except _CapExceeded:
            raise TooLarge(
                f"{url}: {coding} body decompresses to more than {cap_bytes} bytes"
            ) from None
        except (zlib.error, brotli.error) as exc:
            raise FetchError(f"{url}: corrupt {coding} body: {exc}", transient=False) from None
    return body
