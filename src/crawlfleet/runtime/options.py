"""Each consumer's options, built from the crawl's settings: the one place they are read.

A fetcher, the scope, the parse budget or a custom sink is given the small frozen object it
owns (decision 0061), never the whole ``Settings``; the import contract ``narrow-options``
in ``pyproject.toml`` keeps ``crawlfleet.settings`` out of their packages.
"""

from __future__ import annotations

from crawlfleet.fetchers.options import FetchOptions
from crawlfleet.frontier.scope import TrapLimits
from crawlfleet.parsing.budget import ParseLimits
from crawlfleet.pipeline.custom import SinkOptions
from crawlfleet.settings import Settings


def fetch_options(settings: Settings) -> FetchOptions:
    return FetchOptions(
        user_agent=settings.user_agent,
        allow_private_addresses=settings.allow_private_addresses,
        connect_timeout_s=settings.connect_timeout_s,
        read_timeout_s=settings.read_timeout_s,
        total_timeout_s=settings.total_timeout_s,
        max_redirects=settings.max_redirects,
        max_body_bytes=settings.max_body_bytes,
        max_decompressed_bytes=settings.max_decompressed_bytes,
        max_idle_per_origin=settings.concurrency,
    )


def trap_limits(settings: Settings) -> TrapLimits:
    return TrapLimits(
        max_url_chars=settings.max_url_chars,
        max_path_segment_repeats=settings.max_path_segment_repeats,
        max_query_params=settings.max_query_params,
    )


def parse_limits(settings: Settings) -> ParseLimits:
    return ParseLimits(
        max_nesting_depth=settings.max_html_nesting_depth,
        max_parse_s=settings.max_parse_s,
        max_links=settings.max_links_per_page,
        max_context_bytes=settings.max_context_bytes,
    )


def sink_options(settings: Settings) -> SinkOptions:
    return SinkOptions(
        crawl_id=settings.crawl_id,
        state_dir=settings.state_dir,
        postgres_dsn=settings.postgres_dsn,
    )
