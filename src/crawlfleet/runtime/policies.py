"""The crawl's policies read from its settings: politeness and blocks, recrawl rules."""

from __future__ import annotations

from crawlfleet.frontier.ladder import usable_rungs
from crawlfleet.frontier.store_types import BlockRules, DelaySource, DomainPolicy
from crawlfleet.proxies.endpoints import load_tiers
from crawlfleet.recrawl import RecrawlPolicy, RecrawlRule
from crawlfleet.runtime.backends import served_kinds
from crawlfleet.settings import Settings


def domain_policy(settings: Settings) -> DomainPolicy:
    """The crawl's default politeness and block rules, from the settings.

    The ladder keeps the rungs this crawl can use: ``session`` and a ``tier`` rung per proxy
    tier past the first only with ``[crawl.proxies]``, a fetcher rung when its kind is served
    (embedded: on this machine; distributed: by some worker of this build).
    """
    kinds = served_kinds(settings)
    proxies = settings.proxies
    tiers = len(load_tiers(proxies.tiers, proxies.file)) if proxies is not None else 0
    rungs = usable_rungs(
        settings.ladder, proxy_tiers=tiers, kinds=kinds, sessions=proxies is not None
    )
    return DomainPolicy(
        delay_s=settings.delay_s,
        max_in_flight=settings.per_domain_concurrency,
        max_crawl_delay_s=settings.max_crawl_delay_s,
        delay_source=DelaySource(settings.delay_source),
        blocks=BlockRules(
            window=settings.block_window,
            min_samples=settings.block_min_samples,
            threshold=settings.block_threshold,
            recover_after=settings.block_recover_after,
            max_level=settings.block_max_level,
            cooldown_s=settings.block_cooldown_s,
            ladder=rungs,
            refusal_threshold=settings.block_refusal_threshold,
            refusal_kinds=settings.block_refusal_kinds,
        ),
    )


def recrawl_policy(settings: Settings) -> RecrawlPolicy:
    """The crawl's recrawl rules; its own ``recrawl_after`` is the rule of every other page."""
    default = None
    if settings.recrawl_after is not None:
        default = RecrawlRule(
            pattern="",
            after=settings.recrawl_after,
            adaptive=settings.recrawl_adaptive,
            min=settings.recrawl_min,
            max=settings.recrawl_max,
        )
    return RecrawlPolicy(settings.recrawl, default)
