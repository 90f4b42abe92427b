"""One typed settings object for a crawl, validated at start-up.

Sources, lowest priority first: defaults < TOML file (``--config``) < ``CRAWLFLEET_*``
environment variables < CLI flags. ``load_settings`` turns every validation failure into a
one-line ``ConfigError`` naming the key (a value is never echoed: it may be a secret). Every
float must be finite (``--delay inf`` is refused).
"""

from __future__ import annotations

import tomllib
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)
from pydantic_settings.exceptions import SettingsError

from crawlfleet.errors import ConfigError
from crawlfleet.models import DEFAULT_MAX_CONTEXT_BYTES
from crawlfleet.recrawl import Duration, RecrawlRule
from crawlfleet.redisurl import url_problem

DEFAULT_USER_AGENT = "crawlfleet/0.1 (+https://github.com/crawlfleet/crawlfleet)"
DEFAULT_STRIP_PARAMS = (
    "utm_*",
    "gclid",
    "fbclid",
    "sessionid",
    "session_id",
    "jsessionid",
    "phpsessid",
    "sid",
)

Rung = Literal["slow", "session", "tier", "impersonate", "browser"]
"""A rung of the strategy ladder (``frontier/ladder.py``)."""
ResourceType = Literal["image", "font", "media", "stylesheet"]
"""Resource types a browser page may be kept from loading (``browser_block``)."""
DEFAULT_BLOCKED: tuple[ResourceType, ...] = ("image", "font", "media")

MAX_STEP_S = 300.0
"""The default bound on one crawl step (the watchdog of ``runtime/loop.py``)."""
STEP_TIMEOUTS = 3
"""Fetch timeouts one step may spend in turn: its robots.txt, its page, its links' robots."""


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
    parsers: list[str] = Field(default_factory=list, description="modules or .py paths")
    selector_parsers: list[dict[str, Any]] = Field(
        default_factory=list, description="parsers declared with CSS/XPath selectors, no code"
    )

    # Spider traps (frontier/scope.py TrapLimits); raise a limit to lift it
    max_url_chars: int = Field(default=2083, ge=64)
    max_path_segment_repeats: int = Field(default=3, ge=1)
    max_query_params: int = Field(default=16, ge=1)
    max_links_per_page: int = Field(default=5000, ge=1, description="links kept from one page")
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
    obey_robots: bool = True
    robots_ttl_s: float = Field(default=3600.0, gt=0)
    robots_error_ttl_s: float = Field(default=600.0, gt=0)
    user_agent: str = Field(default=DEFAULT_USER_AGENT, min_length=1)
    domains: dict[str, DomainOverride] = Field(
        default_factory=dict, description="per-domain delay_s / concurrency, keyed by host"
    )

    # Block handling: when a domain slows down (frontier.protocols.BlockRules)
    block_window: int = Field(default=20, ge=1, le=1_000)
    block_min_samples: int = Field(default=5, ge=1)
    block_threshold: float = Field(default=0.5, gt=0, le=1)
    block_recover_after: int = Field(default=20, ge=1)
    block_max_level: int = Field(default=5, ge=0, le=10)
    block_cooldown_s: float = Field(default=30.0, ge=0, allow_inf_nan=False)
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
    browser_wait: str = Field(
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
    output: Path | None = None

    # Developer loop (fetchers/cache.py, runtime/fetch_chain.py, pipeline/custom.py)
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
        default=None, description="proxy tiers and crawl sessions (runtime/proxy_link.py)"
    )

    # Distributed runtime
    redis_url: str | None = None
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

    @field_validator("output")
    @classmethod
    def _known_output_format(cls, value: Path | None) -> Path | None:
        if value is not None and value.suffix.lower() not in (
            ".jsonl",
            ".json",
            ".csv",
            ".sqlite",
            ".db",
            ".parquet",
        ):
            raise ValueError("must end in .jsonl, .json, .csv, .parquet or .sqlite")
        if (
            value is not None
            and value.suffix.lower() == ".parquet"
            and find_spec("pyarrow") is None
        ):
            raise ValueError("Parquet needs pyarrow: pip install 'crawlfleet[parquet]'")
        return value

    @field_validator("domains")
    @classmethod
    def _domain_keys_are_hosts(cls, value: dict[str, DomainOverride]) -> dict[str, DomainOverride]:
        hosts: dict[str, DomainOverride] = {}
        for key, override in value.items():
            host = key.strip().lower().rstrip(".")
            if not host or any(c in host for c in "/:@ ") or "*" in host:
                raise ValueError(f"{key!r} is not a host name (write example.com)")
            if host in hosts:
                raise ValueError(f"{key!r} is given twice")
            hosts[host] = override
        return hosts

    @field_validator("browser_wait")
    @classmethod
    def _known_wait_rule(cls, value: str) -> str:
        problem = wait_rule_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("redis_url")
    @classmethod
    def _usable_redis_url(cls, value: str | None) -> str | None:
        problem = redis_url_problem(value) if value is not None else None
        if problem is not None:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _timeouts_consistent(self) -> Settings:
        if self.total_timeout_s < self.connect_timeout_s:
            raise ValueError("total_timeout_s must be >= connect_timeout_s")
        if self.block_min_samples > self.block_window:
            raise ValueError("block_min_samples must be <= block_window")
        if self.proxies is not None and self.proxies.max_wait_s > self.max_step_s / 2:
            raise ValueError("proxies.max_wait_s must be <= max_step_s / 2")
        if len(self.ladder) > self.block_max_level:
            raise ValueError(
                f"ladder has {len(self.ladder)} rungs but block_max_level is "
                f"{self.block_max_level}: shorten ladder or raise block_max_level"
            )
        return self

    @model_validator(mode="after")
    def _recrawl_rules_apply(self) -> Settings:
        tuned = (
            self.recrawl_adaptive or self.recrawl_min is not None or self.recrawl_max is not None
        )
        if tuned and self.recrawl_after is None:
            raise ValueError("recrawl_adaptive, recrawl_min and recrawl_max need recrawl_after")
        if self.revisit != "off" and self.recrawl_after is None and not self.recrawl:
            raise ValueError(
                "--recrawl and --continuous need recrawl_after or [[crawl.recrawl]] rules:"
                " without them no page is ever due again"
            )
        if self.recrawl_after is not None:
            RecrawlRule(pattern="", after=self.recrawl_after, min=self.recrawl_min,
                        max=self.recrawl_max)  # fmt: skip
        return self

    @model_validator(mode="after")
    def _a_step_fits_its_bound(self) -> Settings:
        least_s = STEP_TIMEOUTS * self.total_timeout_s + self.max_parse_s
        browser_extra_s = max(0.0, self.page_timeout_s - self.total_timeout_s)
        least_s += browser_extra_s
        browser = " + (browser_timeout_s - total_timeout_s)" if browser_extra_s else ""
        if self.max_step_s < least_s:
            raise ValueError(
                f"max_step_s ({self.max_step_s:g}) must be >= {STEP_TIMEOUTS} x total_timeout_s"
                f" + max_parse_s{browser} ({least_s:g}): a step may read robots.txt, fetch its"
                " page, parse it and read the robots.txt of its links' new hosts"
            )
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
        return (
            InitSettingsSource(settings_cls, cli),
            env_settings,
            InitSettingsSource(settings_cls, toml),
        )


WAIT_EVENTS = ("load", "domcontentloaded", "networkidle")
CSS_PREFIX = "css:"


def wait_rule_problem(rule: str) -> str | None:
    """Why ``rule`` is not a browser wait rule (an event, or ``css:SELECTOR``), or None."""
    if rule in WAIT_EVENTS or (rule.startswith(CSS_PREFIX) and rule[len(CSS_PREFIX) :].strip()):
        return None
    return f"wait rule {rule!r} is not one of {', '.join(WAIT_EVENTS)} or css:SELECTOR"


def redis_url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a Redis URL (bad port, scheme, cluster nodes), or None; never
    echoes it (``redisurl.py``)."""
    return url_problem(url)


def check_redis_url(url: str, option: str = "--redis") -> str:
    """``url`` if it can be a Redis URL; else a ``ConfigError`` naming ``option``."""
    problem = redis_url_problem(url)
    if problem is not None:
        raise ConfigError(f"bad {option}: {problem}")
    return url


def read_toml(path: Path) -> dict[str, Any]:
    """The settings in a TOML file (a ``[crawl]`` table or top-level keys)."""
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    crawl = data.get("crawl", data)
    if not isinstance(crawl, dict):
        raise ConfigError(f"config file {path}: [crawl] must be a table")
    return crawl


def load_settings(config: Path | None = None, **cli: Any) -> Settings:
    """Build the settings from the file, the environment and the CLI flags (``None`` = unset)."""
    flags = {key: value for key, value in cli.items() if value is not None}
    toml = read_toml(config) if config is not None else {}
    try:
        return Settings(**{"_toml": toml, **flags})
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc, config)) from None
    except SettingsError as exc:
        raise ConfigError(describe_settings_error(exc)) from None


def describe_validation_error(exc: ValidationError, config: Path | None) -> str:
    """One line naming the first bad key and why."""
    first = exc.errors()[0]
    key = ".".join(str(part) for part in first["loc"]) or "settings"
    where = f" (in {config} or CRAWLFLEET_{key.upper()} or a flag)" if config else ""
    if first["type"] == "extra_forbidden":
        return f"unknown setting {key!r}{where}"
    return f"bad setting {key!r}{where}: {first['msg']}"


def describe_settings_error(exc: SettingsError) -> str:
    """One line for an environment variable pydantic-settings could not read (bad JSON)."""
    text = str(exc)
    field = text.split('"')[1] if text.count('"') >= 2 else "settings"
    cause = exc.__cause__
    why = f": {cause}" if isinstance(cause, ValueError) else ""
    return f"bad setting {field!r} in CRAWLFLEET_{field.upper()}: not valid JSON{why}"
