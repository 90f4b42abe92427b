"""The browser fetcher's setting types: blocked resource types and wait rules."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator

from crawlfleet.wait_rules import wait_rule_problem

ResourceType = Literal["image", "font", "media", "stylesheet"]
"""Resource types a browser page may be kept from loading (``browser_block``)."""
DEFAULT_BLOCKED: tuple[ResourceType, ...] = ("image", "font", "media")


def _known_wait_rule(value: str) -> str:
    problem = wait_rule_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


WaitRuleText = Annotated[str, AfterValidator(_known_wait_rule)]
"""A wait rule as the settings hold it: text checked by ``wait_rule_problem``."""
