"""Where a hop goes: scheme, host, port, the ``Host`` header and the request target.

Most URLs a crawl fetches are plain: lower-case http(s), ASCII, no userinfo, percent-escape,
IPv6 literal, dot segment or fragment. Those are split here as they are, which yarl would
leave unchanged (``tests/property/test_targets.py`` holds the two to the same answer); the
rest are serialized by the WHATWG URL Standard (ada-url: what must be escaped is, escapes
already there are sent as they are, ``%3B`` stays ``%3B``) and split by yarl, which is told
the URL is encoded. Parsing every URL with yarl cost ~9 µs a fetch (decision 0038).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ada_url import normalize_url
from yarl import URL

from crawlfleet.errors import FetchError

DEFAULT_PORTS = {"http": 80, "https": 443}
# Characters yarl leaves as they are in a path and a query (no "%", "@", "#", "[", "]").
_UNPLAIN = re.compile(r"[^A-Za-z0-9\-._~!$&'()*+,;=:/?]")
_PLAIN_HOST = re.compile(r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?")
# A host the WHATWG parser reads as an IPv4 address (its last label a number: ``0x7f.1``,
# ``2130706433``), and the only such host that is already as it writes it: a dotted quad.
_ENDS_IN_NUMBER = re.compile(r"(?:.*\.)?(?:[0-9]+|0x[0-9a-f]*)")
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_DOTTED_QUAD = re.compile(rf"(?:{_OCTET}\.){{3}}{_OCTET}")


@dataclass(frozen=True, slots=True)
class Target:
    """A hop's destination. ``host``: as it goes to the resolver (IDNA, lower case, an IPv6
    address without brackets); ``authority``: the ``Host`` header (the port left out when it
    is the scheme's); ``path_qs``: the request target."""

    scheme: str
    host: str
    port: int
    authority: str
    path_qs: str

    @property
    def origin(self) -> tuple[str, str, int]:
        return (self.scheme, self.host, self.port)


def target_of(url: str) -> Target:
    """The target of ``url`` without its userinfo; ``ValueError`` if it is no URL."""
    return _plain(url) or _parsed(url)


def http_target(url: str) -> Target:
    """``target_of`` a URL a fetcher may send: a permanent ``FetchError`` for a scheme other
    than http(s), or no host (``http:///x`` too, which the crawl's URLs never are: ``urls``
    reads it ``http://x/`` first); ``ValueError`` if it is no URL."""
    target = target_of(url)
    if target.scheme not in DEFAULT_PORTS:
        raise FetchError(f"{url}: not an http(s) URL", transient=False)
    if not target.host or url[len(target.scheme) + 3 : len(target.scheme) + 4] == "/":
        raise FetchError(f"invalid URL {url}: no host", transient=False)
    return target


def url_of(url: str) -> URL:
    """``url`` as a browser sends it, parsed by yarl, without its userinfo (never sent: see
    ``fetchers.credentials``); ``ValueError`` if it is no URL."""
    parsed = URL(normalize_url(url), encoded=True)
    return parsed.with_user(None) if parsed.user is not None else parsed


def _parsed(url: str) -> Target:
    parsed = url_of(url)
    return Target(
        parsed.scheme,
        parsed.raw_host or "",
        parsed.port or 0,
        parsed.host_port_subcomponent or "",
        parsed.raw_path_qs,
    )


def _plain(url: str) -> Target | None:
    scheme, sep, rest = url.partition("://")
    default = DEFAULT_PORTS.get(scheme) if sep else None
    if default is None or _UNPLAIN.search(rest) is not None:
        return None
    end = len(rest)
    for mark in ("/", "?"):
        at = rest.find(mark)
        if 0 <= at < end:
            end = at
    authority, path_qs = rest[:end], rest[end:]
    host, colon, port_text = authority.partition(":")
    if _PLAIN_HOST.fullmatch(host) is None or path_qs.endswith("?") or "xn--" in host:
        return None
    if _ENDS_IN_NUMBER.fullmatch(host) is not None and _DOTTED_QUAD.fullmatch(host) is None:
        return None
    if "/." in path_qs.partition("?")[0]:
        return None
    port = default
    if colon:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            return None
        port = int(port_text)
    if not path_qs.startswith("/"):
        path_qs = "/" + path_qs
    return Target(scheme, host, port, host if port == default else f"{host}:{port}", path_qs)
