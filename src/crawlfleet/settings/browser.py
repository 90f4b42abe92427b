"""The browser fetcher's setting types: blocked resource types and wait rules."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator

ResourceType = Literal["image", "font", "media", "stylesheet"]
"""Resource types a browser page may be kept from loading (``browser_block``)."""
DEFAULT_BLOCKED: tuple[ResourceType, ...] = ("image", "font", "media")

WAIT_EVENTS = ("load", "domcontentloaded", "networkidle")
CSS_PREFIX = "css:"


def wait_rule_problem(rule: str) -> str | None:
    """Why ``rule`` is not a browser wait rule (an event, or ``css:SELECTOR``), or None."""
    if rule in WAIT_EVENTS or (rule.startswith(CSS_PREFIX) and rule[len(CSS_PREFIX) :].strip()):
        return None
    return f"wait rule {rule!r} is not one of {', '.join(WAIT_EVENTS)} or css:SELECTOR"


def _known_wait_rule(value: str) -> str:
    problem = wait_rule_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


WaitRuleText = Annotated[str, AfterValidator(_known_wait_rule)]
"""A wait rule as the settings hold it: text checked by ``wait_rule_problem``."""
