"""The private-address predicate, the literal-IP check and the filter of resolved addresses
(``fetchers.wire`` and ``fetchers.impersonate`` filter what the resolver answers with it)."""

from __future__ import annotations

import ipaddress

import pytest

from crawlfleet.errors import ForbiddenAddress
from crawlfleet.fetchers.addresses import (
    allowed_addresses,
    check_literal_host,
    is_forbidden_address,
    parse_ip,
)

FORBIDDEN = [
    "127.0.0.1",
    "127.255.0.9",
    "10.1.2.3",
    "172.16.0.1",
    "192.168.1.1",
    "169.254.169.254",
    "100.64.0.1",
    "0.0.0.0",
    "224.0.0.1",
    "239.255.255.250",
    "240.0.0.1",
    "255.255.255.255",
    "192.0.2.1",
    "::1",
    "::",
    "fe80::1",
    "fe80::1%eth0",
    "fc00::1",
    "fd12:3456::1",
    "ff02::1",
    "ff0e::1",
    "::ffff:127.0.0.1",
    "::ffff:10.0.0.1",
    "2002:7f00:1::1",
    "64:ff9b::a00:1",
    "2001:db8::1",
]
ALLOWED = ["8.8.8.8", "1.1.1.1", "93.184.215.14", "2606:4700:4700::1111", "::ffff:8.8.8.8"]


@pytest.mark.parametrize("text", FORBIDDEN)
def test_non_global_addresses_are_forbidden(text: str) -> None:
    assert is_forbidden_address(ipaddress.ip_address(text))


@pytest.mark.parametrize("text", ALLOWED)
def test_public_addresses_are_allowed(text: str) -> None:
    assert not is_forbidden_address(ipaddress.ip_address(text))


@pytest.mark.parametrize(
    ("host", "expected"),
    [("127.0.0.1", "127.0.0.1"), ("[::1]", "::1"), ("example.com", None), ("127.1", None)],
)
def test_parse_ip(host: str, expected: str | None) -> None:
    parsed = parse_ip(host)
    assert (str(parsed) if parsed else None) == expected


def test_check_literal_host() -> None:
    check_literal_host("example.com", is_forbidden_address)
    check_literal_host("8.8.8.8", is_forbidden_address)
    with pytest.raises(ForbiddenAddress, match=r"10\.0\.0\.1"):
        check_literal_host("10.0.0.1", is_forbidden_address)


def test_allowed_addresses_keep_the_resolver_s_order_and_refuse_when_none_is_left() -> None:
    assert allowed_addresses(
        "a.example", ["8.8.4.4", "10.0.0.1", "8.8.8.8"], is_forbidden_address
    ) == [
        "8.8.4.4",
        "8.8.8.8",
    ]
    with pytest.raises(ForbiddenAddress, match=r"b\.example resolves to 10\.0\.0\.1, ::1"):
        allowed_addresses("b.example", ["::1", "10.0.0.1"], is_forbidden_address)
