"""Bloom filter geometry and bit positions for the seen filter on a Redis bitmap.

The bits live in one Redis string (``{p}:bloom``); the add script tests and sets them. The
``k`` positions of a fingerprint are computed here by double hashing (Kirsch and
Mitzenmacher): ``h1 + i * h2 mod m`` from the two halves of a 128-bit BLAKE2b digest.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

MAX_BITS = 2**32  # a Redis string holds at most 512 MiB


@dataclass(frozen=True, slots=True)
class BloomGeometry:
    """``bits`` (m) and ``hashes`` (k) of a Bloom filter."""

    bits: int
    hashes: int

    @classmethod
    def for_capacity(cls, capacity: int, error_rate: float) -> BloomGeometry:
        """The smallest filter holding ``capacity`` items at ``error_rate`` false positives.

        Raises ValueError when the inputs are out of range or need more than ``MAX_BITS``.
        """
        if capacity < 1 or not 0 < error_rate < 1:
            raise ValueError("bloom capacity must be >= 1 and error rate in (0, 1)")
        bits = math.ceil(-capacity * math.log(error_rate) / math.log(2) ** 2)
        if bits > MAX_BITS:
            raise ValueError(
                f"a Bloom filter for {capacity} items at {error_rate} needs {bits} bits, "
                f"more than one Redis string holds ({MAX_BITS})"
            )
        hashes = max(1, round(bits / capacity * math.log(2)))
        return cls(bits=bits, hashes=hashes)

    @property
    def size_bytes(self) -> int:
        return (self.bits + 7) // 8

    def positions(self, fingerprint: str) -> list[int]:
        digest = hashlib.blake2b(fingerprint.encode("utf-8"), digest_size=16).digest()
        h1 = int.from_bytes(digest[:8], "little")
        h2 = int.from_bytes(digest[8:], "little") | 1
        return [(h1 + i * h2) % self.bits for i in range(self.hashes)]
