"""Per-origin HTTP credentials: the userinfo of seed URLs, kept out of every stored URL.

A seed ``https://user:pw@intranet.example/`` is crawled as ``https://intranet.example/``
(``UrlRules.target`` drops userinfo); its user and password live here, in the process, and
the HTTP fetcher sends them as Basic auth to that origin (scheme, host, port) only: never to
another host a page links or redirects to. They are not written to any store or log.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit

Origin = tuple[str, str, int]
_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_of(url: str) -> Origin | None:
    """``(scheme, host, port)`` of an http(s) URL, the port made explicit; None otherwise."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), port or _DEFAULT_PORTS[scheme]


class Credentials:
    """User and password by origin; the repr shows the origins, never a secret."""

    def __init__(self) -> None:
        self._by_origin: dict[Origin, tuple[str, str]] = {}

    @classmethod
    def from_urls(cls, urls: Iterable[str]) -> Credentials:
        """The credentials in the userinfo of ``urls`` (URLs without one add nothing)."""
        credentials = cls()
        for url in urls:
            credentials.add_from_url(url)
        return credentials

    def add_from_url(self, url: str) -> None:
        """Keep the userinfo of ``url`` for its origin; a later URL of the same origin wins."""
        origin = origin_of(url)
        if origin is None:
            return
        userinfo, at, _ = urlsplit(url).netloc.rpartition("@")
        if not at:
            return
        user, _, password = userinfo.partition(":")
        self._by_origin[origin] = (unquote(user), unquote(password))

    def for_url(self, url: str) -> tuple[str, str] | None:
        """``(user, password)`` for the origin of ``url``, or None."""
        if not self._by_origin:  # most crawls have none: no URL to parse
            return None
        origin = origin_of(url)
        return self._by_origin.get(origin) if origin is not None else None

    def __len__(self) -> int:
        return len(self._by_origin)

    def __repr__(self) -> str:
        origins = sorted(f"{scheme}://{host}:{port}" for scheme, host, port in self._by_origin)
        return f"Credentials({origins})"


def basic_auth(user: str, password: str) -> str:
    """The value of an ``Authorization`` (or ``Proxy-Authorization``) header for Basic auth,
    UTF-8 encoded (RFC 7617)."""
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return f"Basic {token}"
