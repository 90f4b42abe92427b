"""One typed settings object for a crawl, validated at start-up.

Sources, lowest priority first: defaults < TOML file (``--config``) < ``CRAWLFLEET_*``
environment variables < CLI flags. Which of them gave ``delay_s`` is kept as
``delay_source`` (``default``, ``file``, ``env``, ``cli``): ``status`` and the dashboard show
it beside each domain's delay. ``loading.load_settings`` turns every validation
failure into a one-line ``ConfigError`` naming the key (a value is never echoed: it may be a
secret). Every float must be finite (``--delay inf`` is refused).

Here: the keys, their types, defaults and bounds. Elsewhere: the checks beyond a key's
bounds and the rules between keys (``checks.py``), the nested tables
(``domains.py``: ``[crawl.domains]``, ``proxies.py``: ``[crawl.proxies]``),
the browser's types (``browser.py``) and the recrawl rules (``recrawl.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import Field, model_validator
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from crawlfleet.errors import ConfigError
from crawlfleet.models import DEFAULT_MAX_CONTEXT_BYTES
from crawlfleet.recrawl import Duration, RecrawlRule
from crawlfleet.settings.browser import DEFAULT_BLOCKED, ResourceType, WaitRuleText
from crawlfleet.settings.checks import OutputPath, RedisUrlText, check_agreement
from crawlfleet.settings.domains import DomainOverrides
from crawlfleet.settings.proxies import ProxySettings

DEFAULT_USER_AGENT = "crawlfleet/0.1 (+https://github.com/crawlfleet/crawlfleet)"
DEFAULT_STRIP_PARAMS = (
    "utm_*",
    "gclid",
    "fbclid",
    "sessionid",
    "session_id",
    "jsessionid",
    "phpsessid",
)
"""Query parameters left out of a URL's dedup key (``urls.UrlRules``), never out of the URL
requested. Not ``sid``: on many sites it is an article id, and pages would be merged."""

Rung = Literal["slow", "session", "tier", "impersonate", "browser"]
"""A rung of the strategy ladder (``frontier/ladder.py``)."""

MAX_STEP_S = 300.0
"""The default bound on one crawl step (the watchdog of ``runtime/loop/claim.py``)."""
DEFAULT_ATTEMPT_LOG_MAX_ROWS = 200_000
"""Attempts an embedded crawl's log keeps by default (~35 MB; ``frontier/sqlite/retention.py``)."""

DelayLayer = Literal["default", "file", "env", "cli"]
"""The layer that gave ``delay_s``: none (the default), the TOML file, a ``CRAWLFLEET_*``
variable, a CLI flag (or a keyword given to ``Settings``/``load_settings`` in Python)."""


class Settings(BaseSettings):
    """Everything a crawl can be told. Units are in the names (``_s`` seconds, ``_bytes``)."""

    model_config = SettingsConfigDict(
        env_prefix="CRAWLFLEET_", extra="forbid", validate_default=True, allow_inf_nan=False
    )

    # What to crawl
    seeds: list[str] = Field(default_factory=list)
    allowed_domains: list[str] = Field(default_factory=list)
    allow: list[str] = Field(
        default_factory=list, description="URL regexes; if any, one must match"
    )
    deny: list[str] = Field(default_factory=list, description="URL regexes that exclude a URL")
    max_depth: int | None = Field(
        default=100, ge=0, description="links from a seed; the spider-trap backstop"
    )
    max_pages: int | None = Field(default=None, ge=1)
    max_pages_per_domain: int | None = Field(default=None, ge=1)
    follow_sitemaps: bool = False
    sitemap_max_urls: int = Field(
        default=1_000_000, ge=1, description="page URLs read from the crawl's sitemaps"
    )
    sitemap_max_depth: int = Field(default=3, ge=0, description="sitemap index levels followed")
    sitemap_max_sitemaps: int = Field(
        default=10_000, ge=1, description="child sitemaps queued in the crawl"
    )
    sitemap_max_bytes: int = Field(
        default=50 * 1024 * 1024, ge=1024, description="one sitemap, before and after gzip"
    )
    parsers: list[str] = Field(default_factory=list, description="modules or .py paths")
    selector_parsers: list[dict[str, Any]] = Field(
        default_factory=list, description="parsers declared with CSS/XPath selectors, no code"
    )

    # Spider traps (frontier/scope.py TrapLimits); raise a limit to lift it
    max_url_chars: int = Field(default=2083, ge=64)
    max_path_segment_repeats: int = Field(default=3, ge=1)
    max_query_params: int = Field(default=16, ge=1)
    max_links_per_page: int = Field(
        default=100_000, ge=1, description="links kept from one page; the rest are counted"
    )
    max_context_bytes: int = Field(
        default=DEFAULT_MAX_CONTEXT_BYTES,
        ge=2,
        le=1024 * 1024,
        description="one link's context, as JSON",
    )

    # URL handling
    politeness_key: Literal["host", "domain"] = "host"
    strip_query_params: list[str] = Field(default_factory=lambda: list(DEFAULT_STRIP_PARAMS))

    # Politeness
    concurrency: int = Field(default=16, ge=1, le=10_000)
    per_domain_concurrency: int = Field(default=1, ge=1, le=1_000)
    delay_s: float = Field(default=1.0, ge=0)
    delay_source: DelayLayer = Field(
        default="default",
        description="the layer that gave delay_s; recorded by the loader, never set in a file"
        " or the environment (a reader of a recorded crawl passes it back)",
    )
    obey_robots: bool = True
    robots_ttl_s: float = Field(default=3600.0, gt=0)
    robots_error_ttl_s: float = Field(default=600.0, gt=0)
    max_crawl_delay_s: float = Field(
        default=3600.0,
        gt=0,
        allow_inf_nan=False,
        description="a robots Crawl-delay is honoured up to this; a longer one is cut, reported",
    )
    user_agent: str = Field(default=DEFAULT_USER_AGENT, min_length=1)
    robots_token: str | None = Field(
        default=None,
        min_length=1,
        description="the name robots.txt groups address us by (default: from user_agent)",
    )
    domains: DomainOverrides = Field(
        default_factory=dict, description="per-domain delay_s / concurrency, keyed by host"
    )

    # Block handling: when a domain slows down (frontier.store_types.BlockRules)
    block_window: int = Field(default=20, ge=1, le=1_000)
    block_min_samples: int = Field(default=5, ge=1)
    block_threshold: float = Field(default=0.5, gt=0, le=1)
    block_recover_after: int = Field(default=20, ge=1)
    block_max_level: int = Field(default=5, ge=0, le=10)
    block_cooldown_s: float = Field(default=30.0, ge=0, allow_inf_nan=False)
    block_refusal_threshold: float = Field(
        default=0.8, gt=0, le=1, description="share of a full window refused that is a ban"
    )
    block_refusal_kinds: int = Field(
        default=3, ge=1, description="kinds of URL (folders) those refusals must span"
    )
    ladder: list[Rung] = Field(
        default_factory=lambda: list(get_args(Rung)),
        description="what each block level changes; rungs the crawl cannot use are skipped",
    )

    # Fetching
    allow_private_addresses: bool = False
    connect_timeout_s: float = Field(default=10.0, gt=0)
    read_timeout_s: float = Field(default=30.0, gt=0)
    total_timeout_s: float = Field(default=60.0, gt=0)
    max_redirects: int = Field(default=10, ge=0, le=100)
    max_body_bytes: int = Field(default=10 * 1024 * 1024, ge=1024)
    max_decompressed_bytes: int = Field(
        default=10 * 1024 * 1024, ge=1024, description="a body after Content-Encoding"
    )

    # Browser fetcher (fetchers/browser/): Debian's Chromium driven by Playwright
    browser_executable: Path = Field(
        default=Path("/usr/bin/chromium"), description="the Chromium binary (never downloaded)"
    )
    browser_pages: int = Field(default=4, ge=1, le=64, description="concurrent pages per process")
    browser_sessions: int = Field(
        default=1, ge=1, le=64, description="browser contexts (cookie jars) the pages share"
    )
    browser_context_pages: int = Field(
        default=50, ge=1, description="pages before a session slot's context is recycled"
    )
    browser_max_pages: int = Field(
        default=1000, ge=1, description="pages before the browser itself is recycled"
    )
    browser_memory_cap_bytes: int = Field(
        default=2 * 1024**3,
        ge=64 * 1024**2,
        description="summed RSS of the Chromium processes past which the browser is recycled",
    )
    browser_block: list[ResourceType] = Field(
        default_factory=lambda: list(DEFAULT_BLOCKED),
        description="resource types a page may not load",
    )
    browser_wait: WaitRuleText = Field(
        default="load",
        description="load, domcontentloaded, networkidle, or a CSS selector (css:SELECTOR)",
    )
    browser_timeout_s: float | None = Field(
        default=None,
        gt=0,
        le=600,
        description="navigation plus wait rule of one page (default: total_timeout_s)",
    )
    browser_screenshots: bool = Field(
        default=False, description="screenshot failed pages into <state>/screenshots/"
    )

    # Parsing (parsing/budget.py)
    max_html_nesting_depth: int = Field(
        default=2000, ge=64, description="deeper HTML fails unparsed (tree building is quadratic)"
    )
    max_parse_s: float = Field(default=10.0, gt=0, le=3600, description="one page's parse")
    max_body_bytes_in_flight: int = Field(
        default=64 * 1024 * 1024,
        ge=1024 * 1024,
        description="bodies a process's steps hold (fetched, not yet parsed and stored); "
        "no step starts past it, one always may (runtime/step/body_bytes.py)",
    )

    # Data quality (parsing/expect.py, runtime/step/drift.py; decision 0051)
    on_drift: Literal["pause", "continue"] = Field(
        default="pause",
        description="when a parser's pages stop meeting its expectations on a domain: stop "
        "fetching them there (resume-parser re-opens) or only report it",
    )
    drift_threshold: float = Field(
        default=15.0, gt=0, le=1000, description="CUSUM level at which a drift fires (0051)"
    )

    # Retries and leases
    max_retries: int = Field(default=3, ge=0, le=100)
    backoff_base_s: float = Field(default=1.0, ge=0)
    backoff_max_s: float = Field(default=300.0, ge=0)
    max_retry_after_s: float = Field(
        default=3600.0,
        gt=0,
        description="longest Retry-After honoured; a longer one parks the domain this long",
    )
    lease_s: float = Field(
        default=10.0, gt=0, description="renewed every third of it while the step runs (0019)"
    )
    max_step_s: float = Field(
        default=MAX_STEP_S,
        gt=0,
        allow_inf_nan=False,
        description="one crawl step; a longer one is cancelled and its request retried",
    )

    # Freshness (recrawl.py): when a known URL is due again, and how a run revisits
    recrawl_after: Duration | None = Field(
        default=None, description="revisit every page this long after its visit (6h, 0s)"
    )
    recrawl_adaptive: bool = False
    recrawl_min: Duration | None = None
    recrawl_max: Duration | None = None
    recrawl: list[RecrawlRule] = Field(
        default_factory=list, description="per URL pattern or item type; the first match wins"
    )
    revisit: Literal["off", "pass", "continuous"] = Field(
        default="off",
        description="pass: fetch what is due once, then exit; continuous: keep fetching it",
    )

    # Storage
    state_dir: Path = Path(".crawlfleet")
    output: OutputPath | None = None
    archive: str | None = Field(
        default=None,
        description="keep every response fetched as WARC files in this directory (archive/)",
    )
    archive_file_bytes: int = Field(
        default=1_000_000_000, ge=1_000_000, description="size at which a WARC file is rolled"
    )
    attempt_log_max_rows: int | None = Field(
        default=DEFAULT_ATTEMPT_LOG_MAX_ROWS,
        ge=1_000,
        description="newest attempts an embedded crawl's attempt log keeps (None: all)",
    )

    # Developer loop (fetchers/cache.py, runtime/fetching/chain.py, pipeline/custom.py)
    http_cache_dir: Path | None = Field(
        default=None, description="store responses here and replay them (development)"
    )
    http_cache_expiry_s: float | None = Field(
        default=None, gt=0, description="age past which a cached response is fetched again"
    )
    http_cache_only_200: bool = Field(
        default=False, description="cache only 200s (else every response not retried)"
    )
    processors: list[str] = Field(
        default_factory=list, description="'module:function' item processors, after the built-in"
    )
    sinks: list[str] = Field(
        default_factory=list, description="entry points of 'crawlfleet.sinks' also written to"
    )
    secrets_file: Path | None = Field(
        default=None, description="TOML: per-domain login and Basic auth secrets (secretsfile.py)"
    )
    hooks: list[str] = Field(
        default_factory=list, description="'module:object' request/response hooks, in order"
    )
    proxies: ProxySettings | None = Field(
        default=None, description="proxy tiers and crawl sessions (runtime/fetching/proxy_link.py)"
    )

    # Distributed runtime
    redis_url: RedisUrlText | None = None
    postgres_dsn: str | None = None
    crawl_id: str = Field(default="default", pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    dedup: Literal["exact", "bloom"] = "exact"
    bloom_capacity: int = Field(default=10_000_000, ge=1_000)
    bloom_error_rate: float = Field(default=0.01, gt=0, lt=1)
    frontier_partitions: int | None = Field(
        default=None,
        ge=1,
        le=4096,
        description="Redis frontier partitions, fixed when the crawl is created (default: 1,"
        " or the count the crawl was created with)",
    )
    accept_unsafe_redis: bool = Field(
        default=False,
        description="crawl on a Redis without AOF, with eviction, or open without a password",
    )
    worker_wait_s: float = Field(
        default=60.0,
        ge=0,
        description="the dispatcher (and a distributed reparse) stops (exit 2) when no live"
        " worker serves the crawl this long; 0 waits for ever (--wait-for-workers)",
    )

    @model_validator(mode="after")
    def _keys_agree(self) -> Settings:
        check_agreement(self)
        return self

    @property
    def page_timeout_s(self) -> float:
        """The browser's bound on one page: ``browser_timeout_s``, else ``total_timeout_s``."""
        return self.browser_timeout_s or self.total_timeout_s

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        cli = dict(getattr(init_settings, "init_kwargs", {}))
        toml = cli.pop("_toml", {})
        cli_layer = InitSettingsSource(settings_cls, cli)
        toml_layer = InitSettingsSource(settings_cls, toml)
        layers: tuple[tuple[DelayLayer, PydanticBaseSettingsSource], ...] = (
            ("cli", cli_layer),
            ("env", env_settings),
            ("file", toml_layer),
        )
        return cli_layer, env_settings, toml_layer, _DelayLayerSource(settings_cls, layers)


class _DelayLayerSource(PydanticBaseSettingsSource):
    """``delay_source``: the first layer, by priority, that gives ``delay_s``.

    The lowest-priority source: a ``delay_source`` passed as a keyword (a reader restoring a
    recorded crawl's settings) wins over it. In the file or the environment it is refused.
    """

    def __init__(
        self,
        settings_cls: type[BaseSettings],
        layers: Sequence[tuple[DelayLayer, PydanticBaseSettingsSource]],
    ) -> None:
        super().__init__(settings_cls)
        self._layers = layers

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # whole-state source: ``__call__`` does the work

    def __call__(self) -> dict[str, Any]:
        values = {name: layer() for name, layer in self._layers}
        for name in ("env", "file"):
            if "delay_source" in values[name]:
                where = "CRAWLFLEET_DELAY_SOURCE" if name == "env" else "the config file"
                raise ConfigError(
                    f"unknown setting 'delay_source' (in {where}): crawlfleet records which"
                    " layer gave delay_s; set delay_s instead"
                )
        for name, _ in self._layers:
            if "delay_s" in values[name]:
                return {"delay_source": name}
        return {}
