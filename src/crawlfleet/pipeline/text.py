"""The NUL rule every sink shares: U+0000 is removed from every string of an item.

PostgreSQL cannot store U+0000 in ``text`` or ``jsonb`` (the whole batch would fail, so the
page would retry into the dead-letter queue); the SQLite sink removes it too, so that both
runtimes store the same item. ``clean_text`` removes it first; the sinks apply the rule
again to whatever reaches them (item type, key, data keys and values at any depth).
"""

from __future__ import annotations

from typing import Any

NUL = "\x00"


def strip_nul(value: Any) -> Any:
    """``value`` with NUL removed from every string in it, dict keys included."""
    if isinstance(value, str):
        return value.replace(NUL, "") if NUL in value else value
    if isinstance(value, list | tuple):
        return [strip_nul(element) for element in value]
    if isinstance(value, dict):
        return {strip_nul(name): strip_nul(element) for name, element in value.items()}
    return value
