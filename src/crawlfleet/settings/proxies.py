"""The proxy pool and crawl sessions of a crawl's settings (``[crawl.proxies]``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class ProxySettings(BaseModel):
    """The proxy pool and crawl sessions (``[crawl.proxies]``, or ``CRAWLFLEET_PROXIES`` as JSON).

    ``tiers``: lists of ``http://[user:pass@]host:port`` or ``"direct"``, tried in order
    (``proxies/endpoints.py``); ``file``: a proxies file instead (one URL per line, ``---``
    between tiers). ``rotation`` picks the proxy of a new session within its tier.
    ``sessions_per_domain`` crawl sessions (proxy + header profile + cookie jar) per domain.
    A proxy is quarantined ``cooldown_s`` x 2^(strikes - 1), at most ``max_cooldown_s``;
    ``ban_after`` blocks in a row through one proxy quarantine it even when no other proxy
    succeeded on the domain. ``max_wait_s``: longest a step waits for a quarantined last tier.
    ``profiles``: header profile names to draw from (empty: all, ``fetchers/profiles.py``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    tiers: list[list[str]] = Field(default_factory=list)
    file: Path | None = None
    rotation: Literal["round_robin", "least_recently_used"] = "round_robin"
    sessions_per_domain: int = Field(default=4, ge=1, le=1_000)
    cooldown_s: float = Field(default=30.0, gt=0, allow_inf_nan=False)
    max_cooldown_s: float = Field(default=1800.0, gt=0, allow_inf_nan=False)
    ban_after: int = Field(default=2, ge=1, le=100)
    max_wait_s: float = Field(default=60.0, gt=0, allow_inf_nan=False)
    profiles: list[str] = Field(default_factory=list)
