"""The grammar of a browser wait rule (an event, or ``css:SELECTOR``): shared by the settings
that check ``browser_wait`` and the browser fetcher that obeys it (``fetchers/browser/wait.py``)."""

from __future__ import annotations

WAIT_EVENTS = ("load", "domcontentloaded", "networkidle")
CSS_PREFIX = "css:"


def wait_rule_problem(rule: str) -> str | None:
    """Why ``rule`` is not a browser wait rule (an event, or ``css:SELECTOR``), or None."""
    if rule in WAIT_EVENTS or (rule.startswith(CSS_PREFIX) and rule[len(CSS_PREFIX) :].strip()):
        return None
    return f"wait rule {rule!r} is not one of {', '.join(WAIT_EVENTS)} or css:SELECTOR"
