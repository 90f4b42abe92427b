"""When a rendered page is ready to be read: a load event, or an element by CSS selector."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from crawlfleet.errors import ConfigError
from crawlfleet.wait_rules import CSS_PREFIX, wait_rule_problem

Event = Literal["load", "domcontentloaded", "networkidle"]
_EVENTS: dict[str, Event] = {
    "load": "load",
    "domcontentloaded": "domcontentloaded",
    "networkidle": "networkidle",
}


@dataclass(frozen=True, slots=True)
class WaitRule:
    """Wait for ``event`` of the navigation, then (if given) for ``selector`` to be attached.

    A selector wait outlives navigations the page makes by script (a challenge that sets a
    cookie and reloads): the element is looked for in whichever document is current.
    """

    event: Event
    selector: str | None = None

    @classmethod
    def parse(cls, rule: str) -> WaitRule:
        """``load``, ``domcontentloaded``, ``networkidle`` or ``css:SELECTOR``; else ``ConfigError``."""
        problem = wait_rule_problem(rule)
        if problem is not None:
            raise ConfigError(problem)
        if rule.startswith(CSS_PREFIX):
            return cls("domcontentloaded", rule[len(CSS_PREFIX) :].strip())
        return cls(_EVENTS[rule])

    def __str__(self) -> str:
        return f"{CSS_PREFIX}{self.selector}" if self.selector else self.event
