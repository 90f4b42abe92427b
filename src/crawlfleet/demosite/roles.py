"""The demo site's roles (one "domain" each) and the loopback address that serves each."""

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType

SHOP = "shop"
QUOTES = "quotes"
LAB = "lab"
ROBOTS_5XX = "robots-5xx"
ROBOTS_404 = "robots-404"
SLOW_ROBOTS = "slow-robots"
GUARDED = "guarded"

JSAPP = "jsapp"
MIXED = "mixed"
CATALOG = "catalog"
REDESIGN = "redesign"

ROLES: tuple[str, ...] = (
    SHOP, QUOTES, LAB, ROBOTS_5XX, ROBOTS_404, SLOW_ROBOTS, GUARDED, JSAPP, MIXED, CATALOG,
    REDESIGN,
)  # fmt: skip

# Linux routes all of 127.0.0.0/8 to the loopback interface, so each address is a distinct host.
DEFAULT_ADDRESSES: MappingProxyType[str, str] = MappingProxyType(
    {
        SHOP: "127.0.0.2",
        QUOTES: "127.0.0.3",
        LAB: "127.0.0.4",
        ROBOTS_5XX: "127.0.0.5",
        ROBOTS_404: "127.0.0.6",
        SLOW_ROBOTS: "127.0.0.7",
        GUARDED: "127.0.0.20",
        JSAPP: "127.0.0.14",
        MIXED: "127.0.0.15",
        CATALOG: "127.0.0.16",
        REDESIGN: "127.0.0.17",
    }
)

UrlFor = Callable[[str, str], str]
"""Absolute URL of ``path`` on a role: ``url_for("lab", "/")``."""
