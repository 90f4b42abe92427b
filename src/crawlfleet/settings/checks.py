"""The settings' checks beyond each key's type and bounds.

Two keys checked on their own (``output``'s format, ``redis_url``), then the rules between
keys, in this order: timeouts, block window, proxy wait and ladder; recrawl tuning; the
bound on one crawl step; a distributed archive's index. Each failure is a
``ValueError`` whose text ``loading.py`` turns into one line.
"""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Annotated

from pydantic import AfterValidator, BeforeValidator

from crawlfleet.recrawl import RecrawlRule
from crawlfleet.redisurl import url_problem

if TYPE_CHECKING:
    from crawlfleet.settings.model import Settings

STEP_TIMEOUTS = 3
"""Fetch timeouts one step may spend in turn: its robots.txt, its page, its links' robots."""


def _path_unless_object(value: object) -> object:
    """An ``s3://`` URL stays text (a path would fold its ``//``); other text is a path."""
    if isinstance(value, str) and not value.startswith("s3://"):
        return Path(value)
    return value


def _known_output_format(value: Path | str) -> Path | str:
    if isinstance(value, str):
        bucket, _, key = value.removeprefix("s3://").partition("/")
        if not bucket or not key or key.endswith("/"):
            raise ValueError("give s3://bucket/prefix/NAME.jsonl (or .json, .csv, .parquet)")
        value_path = PurePosixPath(key)
    else:
        value_path = PurePosixPath(value.name)
    if value_path.suffix.lower() not in (".jsonl", ".json", ".csv", ".sqlite", ".db", ".parquet"):
        raise ValueError("must end in .jsonl, .json, .csv, .parquet or .sqlite")
    if value_path.suffix.lower() == ".parquet" and find_spec("pyarrow") is None:
        raise ValueError("Parquet needs pyarrow: pip install 'crawlfleet[parquet]'")
    return value


OutputPath = Annotated[
    Path | str, BeforeValidator(_path_unless_object), AfterValidator(_known_output_format)
]
"""An export file (or ``s3://`` object URL) whose suffix names a format this install can
write."""


def _usable_redis_url(value: str) -> str:
    problem = url_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


RedisUrlText = Annotated[str, AfterValidator(_usable_redis_url)]
"""A Redis URL ``redisurl.url_problem`` accepts (never echoed in its error)."""


def check_agreement(settings: Settings) -> None:
    """``ValueError`` naming the first rule between keys that ``settings`` breaks."""
    _timeouts_consistent(settings)
    _recrawl_rules_apply(settings)
    _a_step_fits_its_bound(settings)


def _timeouts_consistent(settings: Settings) -> None:
    if settings.total_timeout_s < settings.connect_timeout_s:
        raise ValueError("total_timeout_s must be >= connect_timeout_s")
    if settings.block_min_samples > settings.block_window:
        raise ValueError("block_min_samples must be <= block_window")
    if settings.block_refusal_kinds > settings.block_window:
        raise ValueError("block_refusal_kinds must be <= block_window")
    if settings.proxies is not None and settings.proxies.max_wait_s > settings.max_step_s / 2:
        raise ValueError("proxies.max_wait_s must be <= max_step_s / 2")
    if len(settings.ladder) > settings.block_max_level:
        raise ValueError(
            f"ladder has {len(settings.ladder)} rungs but block_max_level is "
            f"{settings.block_max_level}: shorten ladder or raise block_max_level"
        )


def _recrawl_rules_apply(settings: Settings) -> None:
    tuned = (
        settings.recrawl_adaptive
        or settings.recrawl_min is not None
        or settings.recrawl_max is not None
    )
    if tuned and settings.recrawl_after is None:
        raise ValueError("recrawl_adaptive, recrawl_min and recrawl_max need recrawl_after")
    if settings.revisit != "off" and settings.recrawl_after is None and not settings.recrawl:
        raise ValueError(
            "--recrawl and --continuous need recrawl_after or [[crawl.recrawl]] rules:"
            " without them no page is ever due again"
        )
    if settings.recrawl_after is not None:
        RecrawlRule(
            pattern="",
            after=settings.recrawl_after,
            min=settings.recrawl_min,
            max=settings.recrawl_max,
        )


def _a_step_fits_its_bound(settings: Settings) -> None:
    least_s = STEP_TIMEOUTS * settings.total_timeout_s + settings.max_parse_s
    browser_extra_s = max(0.0, settings.page_timeout_s - settings.total_timeout_s)
    least_s += browser_extra_s
    browser = " + (browser_timeout_s - total_timeout_s)" if browser_extra_s else ""
    if settings.max_step_s < least_s:
        raise ValueError(
            f"max_step_s ({settings.max_step_s:g}) must be >= {STEP_TIMEOUTS} x total_timeout_s"
            f" + max_parse_s{browser} ({least_s:g}): a step may read robots.txt, fetch its"
            " page, parse it and read the robots.txt of its links' new hosts"
        )
