"""The drift marks in a domain's strategy slot: which parsers a drift paused there.

``drift.<parser>`` is ``paused`` (its pages on the domain are dead-lettered unfetched) or
``seen`` (a drift was detected with ``on_drift = "continue"``); no key: no drift. The store
writes them when a drift test (``frontier/drift.py``) fires (``QueueStore.observe_drift``);
``status``, the metrics and ``resume-parser`` read them.
"""

from __future__ import annotations

from collections.abc import Mapping

MARK_PREFIX = "drift."
PAUSED = "paused"
SEEN = "seen"


def mark_key(parser: str) -> str:
    """The strategy-slot key of ``parser``'s drift mark."""
    return f"{MARK_PREFIX}{parser}"


def paused(strategy: Mapping[str, str], parser: str) -> bool:
    """Whether a domain's strategy slot has ``parser`` paused by a drift."""
    return strategy.get(mark_key(parser)) == PAUSED


def drifts(strategy: Mapping[str, str]) -> dict[str, str]:
    """Parser -> mark (``paused`` or ``seen``) of a domain's strategy slot."""
    return {
        key[len(MARK_PREFIX) :]: value
        for key, value in strategy.items()
        if key.startswith(MARK_PREFIX)
    }
