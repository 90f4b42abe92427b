"""The nesting pre-check answers as this file's scan of every tag does (``parsing/budget.py``,
its scan in C: ``parsing/_nesting.c``)."""

from __future__ import annotations

import random
import re
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawlfleet.parsing._nesting import deepest as scanned_deepest
from crawlfleet.parsing.budget import nested_deeper_than

TAG = re.compile(rb"<(/?)([A-Za-z][A-Za-z0-9-]*)")
NOT_NESTING = set(
    b"area base br col embed hr img input link meta source track wbr param keygen frame "
    b"basefont bgsound p li dt dd tr td th option optgroup rb rt rp rtc thead tbody tfoot "
    b"colgroup caption html head body".split()
)

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


def test_a_slash_after_a_name_is_no_end_tag() -> None:
    # `</x/b>` closes `x` only: each `b` stays open.
    assert nested_deeper_than(b"<b><<x>t</x/b>" * 2100, 2000)


NAME_CHARS = "aAbBlLiI-1p"


@settings(max_examples=2000, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), st.text(NAME_CHARS, min_size=1, max_size=4)), max_size=300),
    st.integers(min_value=0, max_value=60),
)
def test_any_names_are_counted_as_a_scan_of_every_tag_counts_them(
    tags: list[tuple[bool, str]], stop_above: int
) -> None:
    # Names of any case that share prefixes with those that never nest (`li`, `p`), and
    # enough of them to grow the scan's table and empty it again.
    html = b"".join(f"<{'/' if closing else ''}{name}>x".encode() for closing, name in tags)
    depth = deepest(html)
    found = scanned_deepest(html, stop_above)
    assert found == depth if depth <= stop_above else found == stop_above + 1


def test_a_million_names_opened_and_closed_leave_the_page_shallow() -> None:
    # Each name leaves the scan's table when its element closes: it never holds more names
    # than elements are open.
    html = b"".join(b"<n%d>x</n%d>" % (n, n) for n in range(1_000_000))
    assert scanned_deepest(html, 2000) == 1
    assert scanned_deepest(b"<n0>" + html, 2000) == 2


def test_a_name_as_long_as_the_page_is_one_tag() -> None:
    assert scanned_deepest(b"<" + b"a" * 5_000_000, 0) == 1
    assert scanned_deepest(b"</" + b"a" * 5_000_000, 0) == 0


@pytest.mark.parametrize("seed", range(6))
def test_large_pages_answer_as_a_scan_of_every_tag(seed: int) -> None:
    rng = random.Random(seed)
    pieces = [b"<a>", b"</a>", b"<ab>", b"</ab>", b"<b>", b"</b>", b"<span x=1>", b"</span>"]
    pieces += [b"<p>", b"<", b"t"]
    html = b"".join(rng.choice(pieces) for _ in range(400_000))
    depth = deepest(html)
    for max_depth in (depth - 7, depth - 1, depth, depth + 6):
        assert nested_deeper_than(html, max_depth) is (depth > max_depth)
