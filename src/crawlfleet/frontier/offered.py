"""The frontier's memo of the URLs it offered its store: every one, at 12 bytes each.

A page offers ~30 links and nearly all of them were offered before. A plain request (GET,
no body: its fingerprint is its URL's) offered to a store without a budget is final: the
store holds it as seen, so ``Frontier.new_requests`` skips a link found here before
serializing it (a link as the page wrote it, then its request URL) and building a
request (decision 0020). With a budget the store may refuse a request without marking it
seen, so a frontier with a budget keeps no memo.

The memo must hold the whole crawl, not its recent part: a shop's "related products" link
to pages anywhere in the site, so a memo of the last 32,768 URLs caught nearly all repeats
at 20,000 pages and ~3 % of the related links at 1,000,000, where each miss cost a
serialization, a request and an index probe of the store (+0.49 ms a page; decision
0022). So it keeps each URL as two hashes in flat arrays (open addressing, linear probing,
at most 3/4 full): Python's 64-bit ``hash`` (SipHash, keyed per process) and a CRC-32:
25 MB at 1,000,000 URLs. A URL never offered is taken for an offered one only if both
hashes match one of the n held: odds n / 2**96 a lookup, ~1e-16 over a 1,000,000-page
crawl's 30,000,000 links (a fingerprint collision of the store: n**2 / 2**129).

Bounded: past ``MAX_SLOTS`` (4,194,304 slots, 50 MB, 3,145,728 URLs) it stops growing and
remembers no more; later URLs are answered by the store, as every miss is.
"""

from __future__ import annotations

import zlib
from array import array
from collections.abc import Iterable

FIRST_SLOTS = 1 << 16
MAX_SLOTS = 1 << 22
_MASK64 = (1 << 64) - 1


def _hashes(url: str) -> tuple[int, int]:
    """(64-bit hash, never 0: 0 marks a free slot; CRC-32) of ``url``."""
    return (hash(url) & _MASK64) or 1, zlib.crc32(url.encode("utf-8", "surrogatepass"))


class OfferedUrls:
    """URLs offered to the store, held as hashes; grows up to ``max_slots``."""

    def __init__(self, first_slots: int = FIRST_SLOTS, max_slots: int = MAX_SLOTS) -> None:
        self.max_slots = max_slots
        self._count = 0
        self._keys = array("Q", bytes(8 * first_slots))
        self._tags = array("I", bytes(4 * first_slots))

    def seen(self, url: str) -> bool:
        """``_slot``'s probe inlined, the CRC-32 taken only when a slot is held (~29 calls a
        page)."""
        key = (hash(url) & _MASK64) or 1
        keys = self._keys
        mask = len(keys) - 1
        slot = key & mask
        held = keys[slot]
        if not held:
            return False
        tag = zlib.crc32(url.encode("utf-8", "surrogatepass"))
        tags = self._tags
        while held:
            if held == key and tags[slot] == tag:
                return True
            slot = (slot + 1) & mask
            held = keys[slot]
        return False

    def add(self, urls: Iterable[str]) -> None:
        for url in urls:
            if self._count * 4 >= len(self._keys) * 3 and not self._grow():
                return
            key, tag = _hashes(url)
            if self._put(key, tag):
                self._count += 1

    def __len__(self) -> int:
        return self._count

    def _slot(self, key: int, tag: int) -> int:
        """The slot holding (key, tag), else the free slot where it goes."""
        keys, tags = self._keys, self._tags
        mask = len(keys) - 1
        slot = key & mask
        while True:
            held = keys[slot]
            if held == 0 or (held == key and tags[slot] == tag):
                return slot
            slot = (slot + 1) & mask

    def _put(self, key: int, tag: int) -> bool:
        """Hold (key, tag); False if it was held."""
        slot = self._slot(key, tag)
        if self._keys[slot]:
            return False
        self._keys[slot] = key
        self._tags[slot] = tag
        return True

    def _grow(self) -> bool:
        """Double the slots and place every entry again; False when at ``max_slots``."""
        slots = len(self._keys) * 2
        if slots > self.max_slots:
            return False
        old = zip(self._keys, self._tags, strict=True)
        self._keys = array("Q", bytes(8 * slots))
        self._tags = array("I", bytes(4 * slots))
        for key, tag in old:
            if key:
                self._put(key, tag)
        return True
