"""How long a retried request waits: exponential backoff with full jitter.

Deterministic given the random generator passed in; ``Frontier.fail`` passes its own.
"""

from __future__ import annotations

import random


def backoff_s(attempt: int, *, base_s: float, max_s: float, rng: random.Random) -> float:
    """Exponential backoff with full jitter: uniform in [0, min(max_s, base_s * 2**attempt)].

    ``attempt`` counts earlier failures (0 for the first retry).
    """
    if attempt < 0:
        raise ValueError(f"attempt must be >= 0, got {attempt}")
    # 2.0**1024 overflows a float; past 2**62 the cap has long been reached anyway.
    ceiling_s = min(max_s, base_s * 2.0 ** min(attempt, 62))
    return rng.uniform(0.0, max(0.0, ceiling_s))
