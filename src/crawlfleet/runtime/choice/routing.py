"""Which fetcher a new request gets, and which wait rule its page gets in the browser.

A request's fetcher, most specific first: the follow rule (or ``Link``) that found it, then
the parser that will parse its page (``@parser(fetcher=...)``, a selector parser's
``fetcher``), then its host's ``[crawl.domains."HOST"] fetcher``, else ``http`` (``file``
for ``file:`` URLs). ``auto`` becomes the lane name ``auto:<parser>``: the frontier sends it
to the lane the domain's strategy slot learned for that parser (``runtime/choice/adaptive.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol
from urllib.parse import urlsplit

from crawlfleet.errors import ConfigError
from crawlfleet.fetchers.browser.wait import WaitRule
from crawlfleet.parsing.registry import DEFAULT_NAME, ParserRegistry

AUTO = "auto"
AUTO_PREFIX = "auto:"
"""The kind ``auto`` of a URL whose parser is P becomes ``auto:P``; its strategy key too."""


class FetcherOverride(Protocol):
    """A domain's fetcher from the config (``[crawl.domains."HOST"] fetcher``); None: none."""

    @property
    def fetcher(self) -> str | None: ...


class Router:
    """Routes URLs to fetcher kinds and browser wait rules (see the module docstring)."""

    def __init__(
        self,
        registry: ParserRegistry,
        overrides: Mapping[str, FetcherOverride],
        default_wait: str,
    ) -> None:
        self._registry = registry
        self._overrides = overrides
        self._default_wait = default_wait
        # Most crawls name no fetcher in any parser or domain: then a URL's lane needs no
        # parser match (a URL split and a pattern walk per link, ~5 % of a crawl's CPU).
        self._by_url = any(spec.fetcher is not None for spec in registry.specs) or any(
            override.fetcher is not None for override in overrides.values()
        )
        for spec in registry.specs:
            if spec.wait is not None:
                try:
                    WaitRule.parse(spec.wait)
                except ConfigError as exc:
                    raise ConfigError(f"parser {spec.name!r} ({spec.source}): {exc}") from None

    def kind(self, url: str, named: str | None) -> str:
        """The lane of a new request for ``url`` found by a rule naming ``named`` (or None)."""
        if named is not None and named != AUTO:
            return named
        if url.startswith("file:"):
            return "file"
        if not self._by_url:
            return self._auto_lane(url) if named == AUTO else "http"
        chosen = named or self._parser_fetcher(url) or self._domain_fetcher(url) or "http"
        return self._auto_lane(url) if chosen == AUTO else chosen

    def auto_key(self, url: str) -> str | None:
        """``auto:<parser>`` when ``url``'s fetcher is learned (its parser or domain say
        ``auto``, no parser names another), else None."""
        fetcher = self._parser_fetcher(url) or self._domain_fetcher(url)
        return self._auto_lane(url) if fetcher == AUTO else None

    def wait_for(self, url: str) -> str:
        """The browser wait rule of ``url``: its parser's, else the crawl's."""
        spec = self._registry.match(url)
        return spec.wait if spec is not None and spec.wait is not None else self._default_wait

    def _auto_lane(self, url: str) -> str:
        spec = self._registry.match(url)
        return AUTO_PREFIX + (spec.name if spec is not None else DEFAULT_NAME)

    def _parser_fetcher(self, url: str) -> str | None:
        spec = self._registry.match(url)
        return spec.fetcher if spec is not None else None

    def _domain_fetcher(self, url: str) -> str | None:
        try:
            host = (urlsplit(url).hostname or "").lower()
        except ValueError:
            return None
        override = self._overrides.get(host)
        return override.fetcher if override is not None else None
