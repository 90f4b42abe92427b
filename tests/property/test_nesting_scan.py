"""The nesting pre-check answers as a scan of every tag would (``parsing/budget.py``)."""

from __future__ import annotations

import random
import re
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawlfleet.parsing.budget import nested_deeper_than

TAG = re.compile(rb"<(/?)([A-Za-z][A-Za-z0-9-]*)")
NOT_NESTING = {b"p", b"li", b"br", b"td"}  # the ones these pieces use

PIECES = st.sampled_from(
    [
        b"<a>",
        b"</a>",
        b"<A href='/x'>",
        b"</A>",
        b"<b>",
        b"</b>",
        b"<span class=pre>",
        b"</span>",
        b"<p>",
        b"</p>",
        b"<li>",
        b"<br>",
        b"<td>",
        b"<ab>",
        b"</ab",
        b"<",
        b"/",
        b"/b>",
        b"text",
        b"<!-- <",
        b" -->",
        b">",
    ]
)


def deepest(html: bytes) -> int:
    """Every tag scanned in order, as the pre-check's contract describes."""
    open_by_name: Counter[bytes] = Counter()
    depth = deepest = 0
    for closing, name in TAG.findall(html):
        name = name.lower()
        if name in NOT_NESTING:
            continue
        if not closing:
            open_by_name[name] += 1
            depth += 1
            deepest = max(deepest, depth)
        elif open_by_name[name]:
            open_by_name[name] -= 1
            depth -= 1
    return deepest


@settings(max_examples=3000, deadline=None)
@given(st.lists(PIECES, max_size=400), st.integers(min_value=1, max_value=40))
def test_the_answer_is_that_of_a_scan_of_every_tag(pieces: list[bytes], max_depth: int) -> None:
    html = b"".join(pieces)
    assert nested_deeper_than(html, max_depth) is (deepest(html) > max_depth)


def test_runs_cut_out_never_join_into_new_tags() -> None:
    # Each `b` stays open; had `<x>t</x` been cut out to nothing, `<` and `/b>` would join
    # into an end tag that closes it.
    assert nested_deeper_than(b"<b><<x>t</x/b>" * 2100, 2000)


@pytest.mark.parametrize("seed", range(6))
def test_pages_cut_a_piece_at_a_time_answer_as_a_scan_of_every_tag(seed: int) -> None:
    # ~1.5 MB: the runs are cut in pieces of 256 KiB, whose ends fall anywhere in the soup.
    rng = random.Random(seed)
    pieces = [b"<a>", b"</a>", b"<ab>", b"</ab>", b"<b>", b"</b>", b"<span x=1>", b"</span>"]
    pieces += [b"<p>", b"<", b"t"]
    html = b"".join(rng.choice(pieces) for _ in range(400_000))
    depth = deepest(html)
    for max_depth in (depth - 7, depth - 1, depth, depth + 6):
        assert nested_deeper_than(html, max_depth) is (depth > max_depth)
