"""Bloom filter geometry and bit positions for the seen filter on sharded Redis bitmaps.

The bits live in ``shards`` Redis strings (``{p}:bloom:<i>``) of ``SHARD_BYTES`` each; global
bit ``p`` is bit ``p % SHARD_BITS`` of shard ``p // SHARD_BITS``, so the shards concatenated
in order are one bitmap. Why shards: ``MEMORY USAGE`` counts the allocator's size class, and
one 1.2 MB bitmap lands in jemalloc's 1.25 MiB class; a shard of ``SHARD_BYTES`` fills its
32 KiB class to within 16 bytes (the sds header and terminator), so the whole filter costs
its bits rounded up to one shard, plus 56 bytes a key (docs/decisions/0007).

The ``k`` positions of a fingerprint are computed here by double hashing (Kirsch and
Mitzenmacher): ``h1 + i * h2 mod m`` from the two halves of a 128-bit BLAKE2b digest; the add
script only maps them to (shard, offset) and tests and sets the bits.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

# A 32 KiB jemalloc size class less the sds header (5 bytes below 64 KiB) and its NUL byte,
# rounded down to 16 bytes: SET stores it without rounding up, SETBIT never reallocates.
SHARD_BYTES = 32 * 1024 - 16
SHARD_BITS = SHARD_BYTES * 8
MAX_BITS = 2**40  # bit positions stay exact in Lua's doubles (2**53) with a wide margin


@dataclass(frozen=True, slots=True)
class BloomGeometry:
    """``bits`` (m, a whole number of shards) and ``hashes`` (k) of a Bloom filter."""

    bits: int
    hashes: int

    @classmethod
    def for_capacity(cls, capacity: int, error_rate: float) -> BloomGeometry:
        """The smallest whole-shard filter holding ``capacity`` items at ``error_rate``.

        Raises ValueError when the inputs are out of range or need more than ``MAX_BITS``.
        """
        if capacity < 1 or not 0 < error_rate < 1:
            raise ValueError("bloom capacity must be >= 1 and error rate in (0, 1)")
        needed = math.ceil(-capacity * math.log(error_rate) / math.log(2) ** 2)
        if needed > MAX_BITS:
            raise ValueError(
                f"a Bloom filter for {capacity} items at {error_rate} needs {needed} bits, "
                f"more than {MAX_BITS}"
            )
        # k is optimal for the bits needed: the spare bits of the last shard only lower the
        # error rate, while k optimal for them would grow without bound for small capacities.
        hashes = max(1, round(needed / capacity * math.log(2)))
        return cls(bits=math.ceil(needed / SHARD_BITS) * SHARD_BITS, hashes=hashes)

    @property
    def shards(self) -> int:
        return self.bits // SHARD_BITS

    @property
    def size_bytes(self) -> int:
        return self.shards * SHARD_BYTES

    def positions(self, fingerprint: str) -> list[int]:
        digest = hashlib.blake2b(fingerprint.encode("utf-8"), digest_size=16).digest()
        h1 = int.from_bytes(digest[:8], "little")
        h2 = int.from_bytes(digest[8:], "little") | 1
        return [(h1 + i * h2) % self.bits for i in range(self.hashes)]
