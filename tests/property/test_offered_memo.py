"""The memo of offered URLs (``frontier/offered.py``, its table in C: ``frontier/_offered.c``)
answers as a set of the URLs it was given does, as it grows and once it is full."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from crawlfleet.frontier.offered import OfferedUrls

# Any str: non-ASCII, lone surrogates (text a page could not decode), the empty one.
URLS = st.lists(st.text(max_size=40), max_size=300)


@settings(max_examples=200, deadline=None)
@given(held=URLS, asked=URLS, first=st.sampled_from([1, 2, 8, 64]))
def test_the_memo_answers_as_a_set_of_its_urls(
    held: list[str], asked: list[str], first: int
) -> None:
    memo = OfferedUrls(first_slots=first)
    memo.add(held)
    assert len(memo) == len(set(held))
    for url in [*held, *asked]:
        # a URL not held is taken for a held one only if both its hashes match: ~1e-16 here
        assert memo.seen(url) == (url in set(held))


@settings(max_examples=100, deadline=None)
@given(held=URLS, most=st.sampled_from([1, 2, 4, 16]))
def test_a_full_memo_keeps_what_it_held_and_holds_at_most_three_quarters_of_its_slots(
    held: list[str], most: int
) -> None:
    memo = OfferedUrls(first_slots=1, max_slots=most)
    memo.add(held)
    distinct = list(dict.fromkeys(held))
    # it grows while it can; a table of n slots holds at most 3n/4 (even of 1 or 2 slots)
    assert len(memo) == min(len(distinct), 3 * most // 4)
    kept = distinct[: len(memo)]
    assert all(memo.seen(url) for url in kept)
