"""Refusing private addresses: the predicate, a guarding DNS resolver and the literal-IP check.

The guard must see the address a socket actually connects to, so it sits where the addresses
are resolved: in ``fetchers.wire`` for direct connections, and for the impersonate fetcher's
(whose addresses are pinned for libcurl), so a DNS answer that changes between a check and
the connect cannot slip past it. Through a proxy the proxy resolves the host; literal IP
hosts are checked by ``check_literal_host`` before every hop.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Callable, Sequence

from crawlfleet.errors import FetchError, ForbiddenAddress

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
AddressPredicate = Callable[[IPAddress], bool]

# NAT64 (RFC 6052) embeds an IPv4 address in its last 32 bits.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def is_forbidden_address(address: IPAddress) -> bool:
    """True for any address that is not globally routable unicast.

    Covers private, loopback, link-local, multicast, reserved, unspecified and shared (CGNAT)
    ranges, and IPv6 addresses that embed such an IPv4 address (mapped, 6to4, NAT64).
    """
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is None and address in _NAT64:
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if embedded is not None and is_forbidden_address(embedded):
            return True
    return address.is_multicast or not address.is_global


def parse_ip(host: str) -> IPAddress | None:
    """The address if ``host`` is a literal IP (brackets and IPv6 zone allowed), else None."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def check_literal_host(host: str, forbidden: AddressPredicate) -> None:
    """Raise ``ForbiddenAddress`` if ``host`` is a literal IP that ``forbidden`` refuses."""
    address = parse_ip(host)
    if address is not None and forbidden(address):
        raise ForbiddenAddress(f"address {address} is not allowed")


def allowed_addresses(
    host: str, addresses: Sequence[str], forbidden: AddressPredicate
) -> list[str]:
    """The ``addresses`` of ``host`` that ``forbidden`` lets a connection go to, in order.

    Raises ``ForbiddenAddress`` when none is left.
    """
    allowed = [a for a in addresses if not _refused(a, forbidden)]
    if not allowed:
        listed = ", ".join(sorted(set(addresses))) or "nothing"
        raise ForbiddenAddress(f"{host} resolves to {listed}, which is not allowed")
    return allowed


async def resolve(url: str, host: str, port: int, forbidden: AddressPredicate | None) -> list[str]:
    """The addresses of ``host`` a connection for ``url`` may go to, in the resolver's order
    (all of them when ``forbidden`` is None).

    Raises ``FetchError`` (transient) when the lookup fails, ``ForbiddenAddress`` when
    ``forbidden`` leaves none.
    """
    loop = asyncio.get_running_loop()
    try:
        found = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise FetchError(f"DNS lookup failed for {host} ({url}): {exc}") from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in found))
    if forbidden is None:
        return addresses
    return allowed_addresses(host, addresses, forbidden)


def _refused(address: str, forbidden: AddressPredicate) -> bool:
    parsed = parse_ip(address)
    return parsed is None or forbidden(parsed)
