"""Proxy endpoints and their tiers, read from the config, ``CRAWLFLEET_PROXIES`` or a file.

A tier is a list of proxy URLs (``http://host:port``, ``http://user:pass@host:port``) or the
literal ``direct`` (no proxy). Tiers are tried in order: tier 0 first, the next one when every
proxy of a tier is quarantined (see ``runtime/fetching/session_pool.py``).

A proxy is named everywhere by its ``id``: ``px-`` and 10 hex digits of a SHA-256 over
scheme, host, port and user name, so it is stable across runs and processes and shows no
password. The URL with its password is kept only in ``ProxyEndpoint.url``/``auth`` and is
never logged.

The proxies file (``[crawl.proxies] file``): one URL (or ``direct``) per line; a line
``---`` starts the next tier; blank lines and lines starting with ``#`` are ignored.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from crawlfleet.errors import ConfigError

DIRECT = "direct"
"""The tier entry that fetches without a proxy."""
DIRECT_ID = "direct"
TIER_SEPARATOR = "---"
_SCHEMES = ("http",)


@dataclass(frozen=True, slots=True)
class ProxyEndpoint:
    """One proxy (or ``direct``) of one tier.

    ``url`` has no userinfo (``http://host:port``); ``auth`` is the (user, password) pair
    for Basic proxy authentication. ``repr`` shows neither the password nor the user.
    """

    id: str
    tier: int
    url: str | None
    auth: tuple[str, str] | None = None

    def __repr__(self) -> str:
        return f"ProxyEndpoint(id={self.id!r}, tier={self.tier})"

    @property
    def is_direct(self) -> bool:
        return self.url is None

    @property
    def address(self) -> str:
        """``host:port`` of the proxy, or ``direct``."""
        return DIRECT if self.url is None else self.url.removeprefix("http://")

    @property
    def label(self) -> str:
        """What a person may see: the id, host and port (never the user or password)."""
        if self.url is None:
            return DIRECT
        return f"{self.id} ({self.url.removeprefix('http://')})"


def proxy_id(scheme: str, host: str, port: int, user: str = "") -> str:
    """The stable, credential-free id of a proxy."""
    digest = hashlib.sha256(f"{scheme}://{user}@{host}:{port}".encode()).hexdigest()
    return f"px-{digest[:10]}"


def parse_endpoint(entry: str, tier: int) -> ProxyEndpoint:
    """One tier entry; ``ConfigError`` (never echoing the entry: it may hold a password)."""
    text = entry.strip()
    if text.lower() == DIRECT:
        return ProxyEndpoint(DIRECT_ID, tier, None)
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise ConfigError(f"proxy tier {tier}: an entry is not a URL") from None
    scheme = parts.scheme.lower()
    if scheme.startswith("socks"):
        raise ConfigError(
            f"proxy tier {tier}: SOCKS proxies are not supported (use http:// proxies)"
        )
    if scheme not in _SCHEMES or not parts.hostname:
        raise ConfigError(
            f"proxy tier {tier}: an entry is neither 'direct' nor http://[user:pass@]host:port"
        )
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ConfigError(f"proxy tier {tier}: a proxy URL has a path or query")
    host = parts.hostname
    port = port or 80
    user = unquote(parts.username or "")
    auth = (user, unquote(parts.password or "")) if parts.username is not None else None
    netloc = f"[{host}]" if ":" in host else host
    return ProxyEndpoint(proxy_id(scheme, host, port, user), tier, f"http://{netloc}:{port}", auth)


def build_tiers(tiers: Sequence[Sequence[str]]) -> list[list[ProxyEndpoint]]:
    """Endpoints by tier; ``ConfigError`` for an empty tier or a proxy given twice."""
    built: list[list[ProxyEndpoint]] = []
    seen: set[str] = set()
    for index, entries in enumerate(tiers):
        if not entries:
            raise ConfigError(f"proxy tier {index} is empty")
        tier = [parse_endpoint(entry, index) for entry in entries]
        for endpoint in tier:
            if endpoint.id in seen:
                raise ConfigError(f"proxy {endpoint.id} is listed twice (tier {index})")
            seen.add(endpoint.id)
        built.append(tier)
    return built


def read_proxies_file(path: Path) -> list[list[str]]:
    """The tiers of a proxies file (see the module docstring)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read proxies file {path}: {exc.strerror}") from None
    tiers: list[list[str]] = [[]]
    for line in text.splitlines():
        entry = line.strip()
        if not entry or entry.startswith("#"):
            continue
        if entry == TIER_SEPARATOR:
            tiers.append([])
        else:
            tiers[-1].append(entry)
    if not any(tiers):
        raise ConfigError(f"proxies file {path} lists no proxy")
    return tiers


def load_tiers(tiers: Sequence[Sequence[str]], file: Path | None) -> list[list[ProxyEndpoint]]:
    """The crawl's tiers: the file's when one is given, else ``tiers``; ``ConfigError`` if none."""
    entries = read_proxies_file(file) if file is not None else [list(tier) for tier in tiers]
    if not entries:
        raise ConfigError("[crawl.proxies] needs tiers = [[...], ...] or file = PATH")
    return build_tiers(entries)
