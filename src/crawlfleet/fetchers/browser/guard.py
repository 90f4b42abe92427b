"""What a page may load: every request it makes passes here (Playwright route interception).

Two refusals: a blocked resource type (images, fonts, media by default: a crawl reads the DOM,
not the pixels), and the private-address guard of the HTTP fetcher (``fetchers.addresses``):
a request to a host that is, or resolves to, an address ``forbidden`` refuses is aborted,
for the page itself, its redirects, and every sub-resource, XHR and fetch it makes.

Chromium resolves names itself after the check, so a DNS answer that changes between the
check and the connect (rebinding) is not caught here as it is by the HTTP fetcher's resolver;
decision 0012 records this limit.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Collection
from urllib.parse import urlsplit

from crawlfleet.fetchers.addresses import AddressPredicate, parse_ip

RESOLVED_TTL_S = 30.0
"""How long a host's checked answer is reused by one guard."""


class RequestGuard:
    """Decides each request a page makes: go (None), or why it is refused."""

    def __init__(self, forbidden: AddressPredicate | None, blocked_types: Collection[str]) -> None:
        self.forbidden = forbidden
        self.blocked_types = frozenset(blocked_types)
        self._checked: dict[str, tuple[float, str | None]] = {}

    @property
    def active(self) -> bool:
        """Whether any request can be refused (else no route needs installing)."""
        return self.forbidden is not None or bool(self.blocked_types)

    async def refusal(self, url: str, resource_type: str) -> str | None:
        """Why the request must be aborted (a blocked type, a forbidden address), or None."""
        if resource_type in self.blocked_types:
            return f"resource type {resource_type} blocked"
        forbidden = self.forbidden
        if forbidden is None:
            return None
        try:
            parts = urlsplit(url)
            host, port = parts.hostname, parts.port
        except ValueError:
            return f"unparsable URL {url!r}"
        if parts.scheme not in ("http", "https", "ws", "wss") or not host:
            return None
        return await self._address_refusal(host, port or 0, forbidden)

    async def _address_refusal(
        self, host: str, port: int, forbidden: AddressPredicate
    ) -> str | None:
        now = time.monotonic()
        known = self._checked.get(host)
        if known is not None and now - known[0] < RESOLVED_TTL_S:
            return known[1]
        reason = await _check(host, port, forbidden)
        self._checked[host] = (now, reason)
        return reason


async def _check(host: str, port: int, forbidden: AddressPredicate) -> str | None:
    """Why ``host`` may not be connected to: it is, or one of its addresses is, refused."""
    literal = parse_ip(host)
    if literal is not None:
        return f"address {literal} is not allowed" if forbidden(literal) else None
    try:
        answers = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return None  # Chromium fails the lookup itself, as a network error
    addresses = {str(info[4][0]) for info in answers}
    refused = sorted(a for a in addresses if (ip := parse_ip(a)) is None or forbidden(ip))
    if refused:
        return f"{host} resolves to {', '.join(refused)}, which is not allowed"
    return None
