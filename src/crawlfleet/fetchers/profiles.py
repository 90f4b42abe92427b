"""Browser header profiles: coherent header sets in the order each browser sends them.

A small curated set (decision 0013: browserforge 1.2.4 was measured and left out). Each
profile is one browser on one platform: its User-Agent, its client hints (Chromium browsers
only: ``sec-ch-ua``, ``sec-ch-ua-mobile``, ``sec-ch-ua-platform``, with the brand version of the
UA), ``Accept``, ``Accept-Language``, ``Accept-Encoding`` (only the codings
``decoding.decode_body`` undoes) and the ``Sec-Fetch-*`` of a top-level navigation. One crawl
session keeps one profile; ``user_agent(name)`` gives a browser fetcher the matching UA.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from crawlfleet.errors import ConfigError

_CHROME_ACCEPT = (
    "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,"
    "image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7"
)
_FIREFOX_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
_SAFARI_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
_NAVIGATE = (
    ("Sec-Fetch-Site", "none"),
    ("Sec-Fetch-Mode", "navigate"),
    ("Sec-Fetch-User", "?1"),
    ("Sec-Fetch-Dest", "document"),
)


@dataclass(frozen=True, slots=True)
class HeaderProfile:
    """One browser's request headers, in its order."""

    name: str
    headers: tuple[tuple[str, str], ...]

    @property
    def user_agent(self) -> str:
        return dict(self.headers)["User-Agent"]

    def as_dict(self) -> dict[str, str]:
        """The headers in order (a dict keeps insertion order)."""
        return dict(self.headers)


def _chromium(name: str, brand: str, version: str, platform: str, ua_os: str) -> HeaderProfile:
    ua_brand = "" if brand == "Google Chrome" else f" Edg/{version}.0.0.0"
    return HeaderProfile(
        name,
        (
            ("sec-ch-ua", f'"{brand}";v="{version}", "Chromium";v="{version}", '
             '"Not_A Brand";v="24"'),
            ("sec-ch-ua-mobile", "?0"),
            ("sec-ch-ua-platform", f'"{platform}"'),
            ("Upgrade-Insecure-Requests", "1"),
            ("User-Agent", f"Mozilla/5.0 ({ua_os}) AppleWebKit/537.36 (KHTML, like Gecko) "
             f"Chrome/{version}.0.0.0 Safari/537.36{ua_brand}"),
            ("Accept", _CHROME_ACCEPT),
            *_NAVIGATE,
            ("Accept-Encoding", "gzip, deflate, br"),
            ("Accept-Language", "en-US,en;q=0.9"),
        ),
    )  # fmt: skip


def _firefox(name: str, version: str, ua_os: str) -> HeaderProfile:
    return HeaderProfile(
        name,
        (
            ("User-Agent", f"Mozilla/5.0 ({ua_os}; rv:{version}.0) Gecko/20100101 "
             f"Firefox/{version}.0"),
            ("Accept", _FIREFOX_ACCEPT),
            ("Accept-Language", "en-US,en;q=0.5"),
            ("Accept-Encoding", "gzip, deflate, br"),
            ("Upgrade-Insecure-Requests", "1"),
            *_NAVIGATE,
        ),
    )  # fmt: skip


_SAFARI = HeaderProfile(
    "safari-17-macos",
    (
        ("Accept", _SAFARI_ACCEPT),
        ("Sec-Fetch-Site", "none"),
        ("Accept-Encoding", "gzip, deflate, br"),
        ("Sec-Fetch-Mode", "navigate"),
        ("User-Agent", "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 "
         "(KHTML, like Gecko) Version/17.6 Safari/605.1.15"),
        ("Accept-Language", "en-US,en;q=0.9"),
        ("Sec-Fetch-Dest", "document"),
    ),
)  # fmt: skip

PROFILES: Mapping[str, HeaderProfile] = MappingProxyType(
    {
        profile.name: profile
        for profile in (
            _chromium("chrome-131-windows", "Google Chrome", "131", "Windows",
                      "Windows NT 10.0; Win64; x64"),
            _chromium("chrome-131-macos", "Google Chrome", "131", "macOS",
                      "Macintosh; Intel Mac OS X 10_15_7"),
            _chromium("chrome-131-linux", "Google Chrome", "131", "Linux", "X11; Linux x86_64"),
            _chromium("edge-131-windows", "Microsoft Edge", "131", "Windows",
                      "Windows NT 10.0; Win64; x64"),
            _firefox("firefox-133-windows", "133", "Windows NT 10.0; Win64; x64"),
            _firefox("firefox-133-linux", "133", "X11; Linux x86_64"),
            _SAFARI,
        )
    }
)  # fmt: skip
"""Every profile by name."""


def profile(name: str) -> HeaderProfile:
    """The profile ``name``; ``ConfigError`` for an unknown one."""
    found = PROFILES.get(name)
    if found is None:
        raise ConfigError(f"unknown header profile {name!r} (known: {sorted(PROFILES)})")
    return found


def user_agent(name: str) -> str:
    """The User-Agent of profile ``name``: what a browser fetcher of that session must send."""
    return profile(name).user_agent


def pick_profile(rng: random.Random, names: tuple[str, ...] = ()) -> HeaderProfile:
    """A random profile among ``names`` (empty: all of them)."""
    return profile(rng.choice(names or tuple(PROFILES)))
