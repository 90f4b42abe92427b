"""Per-domain politeness of a crawl's settings (``[crawl.domains."example.com"]``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field


class DomainOverride(BaseModel):
    """Per-domain politeness from the config (``[crawl.domains."example.com"]``).

    Replaces the crawl's ``delay_s`` / ``per_domain_concurrency`` for that domain; a robots
    ``Crawl-delay`` never replaces an overridden delay.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    delay_s: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    concurrency: int | None = Field(default=None, ge=1, le=1_000)
    fetcher: Literal["http", "browser", "auto"] | None = None
    """The fetcher of the domain's pages that no follow rule or parser names."""


def _by_host(value: dict[str, DomainOverride]) -> dict[str, DomainOverride]:
    """The overrides keyed by lower-cased host without a trailing dot; ``ValueError`` for a
    key that is no host name, or a host given twice."""
    hosts: dict[str, DomainOverride] = {}
    for key, override in value.items():
        host = key.strip().lower().rstrip(".")
        if not host or any(c in host for c in "/:@ ") or "*" in host:
            raise ValueError(f"{key!r} is not a host name (write example.com)")
        if host in hosts:
            raise ValueError(f"{key!r} is given twice")
        hosts[host] = override
    return hosts


DomainOverrides = Annotated[dict[str, DomainOverride], AfterValidator(_by_host)]
"""The ``domains`` setting: overrides keyed by host."""
