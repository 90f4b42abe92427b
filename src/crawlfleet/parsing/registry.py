"""Which parser handles a URL: the most specific match wins, the default parser the rest.

Specificity, in order:

1. the domain: a parser for the exact host beats one for a parent domain (``www.shop.example``
   beats ``shop.example``), which beats a parser for any domain;
2. then the pattern with the most literal characters (``/p/special/*`` beats ``/p/*``, which
   beats no pattern);
3. then the parser added first.

Two parsers with the same name, or the same domain and pattern, are a ``ConfigError``.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from urllib.parse import urlsplit

from pydantic import BaseModel

from crawlfleet.errors import ConfigError
from crawlfleet.parsing.default import default_parser
from crawlfleet.parsing.expect import Expect
from crawlfleet.parsing.plugins import ParserSpec, compile_regex
from crawlfleet.parsing.protocols import Parser
from crawlfleet.patterns import Pattern

DEFAULT_NAME = "default"
REGEX_PREFIX = "re:"
_GLOB_SPECIALS = frozenset("*?[]")
_REGEX_SPECIALS = frozenset(".^$*+?{}[]\\|()")


class PathPattern:
    """A glob on path+query (``/p/*``), or a regex searched in it (``re:^/p/\\d+$``)."""

    def __init__(self, pattern: str | None, owner: str) -> None:
        self.pattern = pattern
        self._regex: Pattern | None = None
        if pattern is None:
            self.literal_chars = 0
        elif pattern.startswith(REGEX_PREFIX):
            body = pattern[len(REGEX_PREFIX) :]
            self._regex = compile_regex(body, f"parser {owner!r} pattern")
            self.literal_chars = sum(c not in _REGEX_SPECIALS for c in body)
        else:
            self.literal_chars = sum(c not in _GLOB_SPECIALS for c in pattern)

    def matches(self, path_query: str) -> bool:
        if self.pattern is None:
            return True
        if self._regex is not None:
            return self._regex.search(path_query) is not None
        return fnmatch.fnmatchcase(path_query, self.pattern)


class ParserRegistry:
    """The parsers of a crawl; ``select`` picks one per URL."""

    def __init__(self, specs: Iterable[ParserSpec] = (), default: Parser = default_parser) -> None:
        self.default = default
        self._specs: dict[str, ParserSpec] = {}
        self._claims: dict[tuple[str | None, str | None], str] = {}
        # domain (None: any) -> [(literal chars, order, pattern, spec)], most specific first
        self._by_domain: dict[str | None, list[tuple[int, int, PathPattern, ParserSpec]]] = {}
        self._expecting = False
        for spec in specs:
            self.add(spec)

    def add(self, spec: ParserSpec) -> None:
        """Register ``spec``; raises ``ConfigError`` on a name or URL claim already taken."""
        domain = spec.domain.strip(".").lower() if spec.domain else None
        if spec.name == DEFAULT_NAME:
            raise ConfigError(f"parser name {DEFAULT_NAME!r} is reserved ({spec.source})")
        if spec.name in self._specs:
            raise ConfigError(
                f"two parsers named {spec.name!r} (from {self._specs[spec.name].source} and "
                f"{spec.source}); give one another name="
            )
        claim = (domain, spec.pattern)
        if claim in self._claims:
            raise ConfigError(
                f"parsers {self._claims[claim]!r} and {spec.name!r} both claim "
                f"domain={domain!r} pattern={spec.pattern!r}"
            )
        pattern = PathPattern(spec.pattern, spec.name)
        self._specs[spec.name] = spec
        self._expecting = self._expecting or spec.expect is not None
        self._claims[claim] = spec.name
        bucket = self._by_domain.setdefault(domain, [])
        bucket.append((pattern.literal_chars, len(self._specs), pattern, spec))
        bucket.sort(key=lambda entry: (-entry[0], entry[1]))

    def select(self, url: str) -> tuple[str, Parser]:
        """The name and parser for ``url`` (``("default", default_parser)`` if none claims it)."""
        spec = self.match(url)
        return (spec.name, spec.parse) if spec is not None else (DEFAULT_NAME, self.default)

    def match(self, url: str) -> ParserSpec | None:
        """The most specific parser claiming ``url``, or None."""
        try:
            parts = urlsplit(url)
            host = (parts.hostname or "").lower()
        except ValueError:
            return None
        path_query = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        for domain in (*_suffixes(host), None):
            for _, _, pattern, spec in self._by_domain.get(domain, ()):
                if pattern.matches(path_query):
                    return spec
        return None

    def get(self, name: str) -> tuple[str, Parser]:
        """The parser called ``name`` (``default`` included); ``ConfigError`` if unknown."""
        if name == DEFAULT_NAME:
            return DEFAULT_NAME, self.default
        if name not in self._specs:
            known = ", ".join([DEFAULT_NAME, *self._specs])
            raise ConfigError(f"no parser named {name!r} (known: {known})")
        return name, self._specs[name].parse

    @property
    def expecting(self) -> bool:
        """Whether any parser states expectations (else no page is checked or watched)."""
        return self._expecting

    def expectation(self, name: str) -> Expect | None:
        """What the pages of parser ``name`` must hold (None: nothing, or no such parser)."""
        spec = self._specs.get(name)
        return spec.expect if spec is not None else None

    @property
    def specs(self) -> tuple[ParserSpec, ...]:
        """Every registered parser, in the order added."""
        return tuple(self._specs.values())

    def schemas(self) -> dict[str, type[BaseModel]]:
        """Item type -> pydantic schema, for the pipeline's validation."""
        schemas: dict[str, type[BaseModel]] = {}
        for spec in self._specs.values():
            if spec.schema is None or spec.item_type is None:
                continue
            known = schemas.setdefault(spec.item_type, spec.schema)
            if known is not spec.schema:
                raise ConfigError(
                    f"item type {spec.item_type!r} has two schemas "
                    f"({known.__name__} and {spec.schema.__name__}, parser {spec.name!r})"
                )
        return schemas

    def __len__(self) -> int:
        return len(self._specs)


def _suffixes(host: str) -> list[str]:
    """``a.b.c`` -> ``["a.b.c", "b.c", "c"]``: the host, then each parent domain."""
    labels = host.split(".")
    return [".".join(labels[i:]) for i in range(len(labels))] if host else []
