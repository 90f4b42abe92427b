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

Bounded: past ``max_slots`` (4,194,304 slots, 50 MB, 3,145,728 URLs) it stops growing and
remembers no more; later URLs are answered by the store, as every miss is.

The table is C (``_offered.c``): the same arrays and hashes, ~60 ns a lookup where the
Python one took ~300-440 ns, ~2 % of an embedded crawl's main thread (decision 0067).
"""

from __future__ import annotations

from crawlfleet.frontier import _offered

OfferedUrls = _offered.OfferedUrls
