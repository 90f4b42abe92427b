"""What the adaptive fetcher learned, per domain and parser, in the domain's strategy slot.

A request whose fetcher is ``auto`` is admitted with the kind ``auto:<parser>`` (the parser
that will read its page: ``runtime/choice/routing.py``). The frontier turns that into a lane from
the domain's strategy slot (``QueueStore.set_strategy``, shared by every process and kept
across restarts):

``auto:<parser>``          ``http`` or ``browser`` once learned (absent while sampling)
``auto:<parser>:samples``  how many sample pages read the same both ways so far

Learned ``http``: the HTTP lane, except one request in ``RECHECK_EVERY`` (by fingerprint)
that goes to the browser lane to be checked again. Learned ``browser`` or still sampling:
the browser lane, where ``runtime/choice/adaptive.py`` fetches samples both ways and writes what
it found.
"""

from __future__ import annotations

from collections.abc import Mapping

AUTO_PREFIX = "auto:"
SAMPLES = 2
"""Sample pages of a parser that must read the same over HTTP as in the browser."""
RECHECK_EVERY = 50
"""One request in this many of a parser learned ``http`` is checked again in the browser."""


def samples_key(key: str) -> str:
    return f"{key}:samples"


def lane_for(strategy: Mapping[str, str], key: str, fingerprint: str) -> str:
    """The lane of a request of ``key`` (``auto:<parser>``): ``http`` or ``browser``."""
    if strategy.get(key) == "http" and not rechecked(fingerprint):
        return "http"
    return "browser"


def rechecked(fingerprint: str) -> bool:
    """Whether a request of a parser learned ``http`` is one of its re-check samples."""
    return int(fingerprint[:8], 16) % RECHECK_EVERY == 0
