"""Which canonical URLs belong to a crawl: allowed domains, allow/deny patterns, depth."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from crawlfleet.patterns import compile_any as _compile
from crawlfleet.urls import host_of, registrable_domain


class Scope:
    """Decides whether a canonical URL may enter the frontier.

    ``allowed_domains`` match a host and all its subdomains; when empty, the registrable
    domains of the seeds are allowed. ``file:`` URLs are in scope only when a seed is one.
    """

    def __init__(
        self,
        *,
        allowed_domains: Iterable[str],
        allow: Sequence[str] = (),
        deny: Sequence[str] = (),
        max_depth: int | None = None,
    ) -> None:
        self._domains = tuple(sorted({d.lower().lstrip(".") for d in allowed_domains}))
        self._allow = _compile(allow, "allow")
        self._deny = _compile(deny, "deny")
        self.max_depth = max_depth
        self._files = "file" in self._domains

    @classmethod
    def for_seeds(
        cls,
        seeds: Iterable[str],
        *,
        allowed_domains: Sequence[str] = (),
        allow: Sequence[str] = (),
        deny: Sequence[str] = (),
        max_depth: int | None = None,
    ) -> Scope:
        domains = list(allowed_domains) or [
            registrable_domain(host_of(s)) if host_of(s) else "file" for s in seeds
        ]
        return cls(allowed_domains=domains, allow=allow, deny=deny, max_depth=max_depth)

    def domain_allowed(self, host: str) -> bool:
        if not host:
            return self._files
        return any(host == d or host.endswith("." + d) for d in self._domains)

    def reason_to_skip(self, url: str, depth: int) -> str | None:
        """None when the URL is in scope, else a short reason."""
        if self.max_depth is not None and depth > self.max_depth:
            return "max depth"
        if not self.domain_allowed(host_of(url)):
            return "off-site"
        if self._deny is not None and self._deny.search(url):
            return "denied by pattern"
        if self._allow is not None and not self._allow.search(url):
            return "not allowed by pattern"
        return None
