"""The frontier skips links it already offered its store: same requests admitted, same counts."""

from __future__ import annotations

import pytest

from crawlfleet.frontier.frontier import Frontier
from crawlfleet.frontier.memory import MemoryQueueStore
from crawlfleet.frontier.offered import OfferedUrls
from crawlfleet.models import CrawlRequest, Link
from crawlfleet.runtime.policies import domain_policy
from crawlfleet.runtime.wiring import build_frontier
from crawlfleet.settings import Settings

SEED = "http://shop.test/"
PAGE = CrawlRequest("http://shop.test/a", "fp", "shop.test", depth=1)


def frontier(**settings: object) -> Frontier:
    config = Settings(**settings)  # type: ignore[arg-type]
    return build_frontier(config, MemoryQueueStore(policy=domain_policy(config)), [SEED])


def links() -> list[Link | str]:
    return [
        "http://shop.test/b",
        "HTTP://Shop.test:80/b#top",  # the same canonical URL
        "http://shop.test/c",
        "http://other.test/x",  # off-site
        "mailto:someone@shop.test",  # not a URL to fetch
        Link.post("http://shop.test/b", form={"q": "1"}),
    ]


async def test_links_offered_before_are_not_built_again_and_still_counted() -> None:
    front = frontier()
    first, offered, _ = front.new_requests(links(), PAGE)
    assert offered == len(first) == len(front.requests_for(links(), PAGE)[0]) == 4
    assert await front.add(first) == 3  # /b, /c and the POST (its own fingerprint)
    again, offered, _ = front.new_requests([*links(), "http://shop.test/d"], PAGE)
    # The POST is never skipped (its fingerprint is not its URL's); the store refuses it.
    assert [r.url for r in again] == ["http://shop.test/b", "http://shop.test/d"]
    assert again[0].method == "POST"
    assert offered == 5
    assert await front.add(again) == 1


async def test_past_the_max_depth_nothing_is_offered() -> None:
    front = frontier(max_depth=1)
    await front.add(front.new_requests(links(), None)[0])
    requests, offered, refused = front.new_requests(links(), PAGE)  # links at depth 2
    assert (requests, offered) == ([], 0)
    # counted by why: the depth is checked first, after the URL is read
    assert refused == {"dropped.max_depth": 5, "filtered.bad_url": 1}
    assert front.requests_for(links(), PAGE)[0] == []


async def test_with_a_budget_every_link_goes_to_the_store() -> None:
    front = frontier(max_pages=1)
    assert await front.add(front.new_requests(["http://shop.test/b"], None)[0]) == 1
    refused, offered, _ = front.new_requests(["http://shop.test/c"], None)
    assert offered == 1
    assert await front.add(refused) == 0  # refused by the budget, not marked seen
    again, _, _ = front.new_requests(["http://shop.test/b", "http://shop.test/c"], None)
    assert [r.url for r in again] == ["http://shop.test/b", "http://shop.test/c"]


def test_the_memo_holds_every_offered_url_as_it_grows() -> None:
    memo = OfferedUrls(first_slots=8)
    urls = [f"http://shop.test/p/{n}" for n in range(5_000)]
    memo.add(urls[::2])
    memo.add(urls[:10])  # offered again: held once
    assert len(memo) == 2_505
    assert all(memo.seen(u) for u in urls[::2])
    assert sum(memo.seen(u) for u in urls[1::2]) == 5  # 1, 3, 5, 7, 9
    assert not memo.seen("http://shop.test/p/5000")


def test_past_its_bound_the_memo_remembers_no_more_and_forgets_nothing() -> None:
    memo = OfferedUrls(first_slots=8, max_slots=16)
    memo.add(f"u{n}" for n in range(20))
    assert len(memo) == 12  # 16 slots, at most 3/4 full
    assert all(memo.seen(f"u{n}") for n in range(12))
    assert not any(memo.seen(f"u{n}") for n in range(12, 20))


async def test_a_link_is_skipped_as_written_or_once_canonical() -> None:
    front = frontier()
    await front.add(front.new_requests(["http://shop.test/b"], PAGE)[0])
    again, offered, _ = front.new_requests(["http://shop.test/b", "HTTP://shop.test:80/b#x"], PAGE)
    assert (again, offered) == ([], 2)


def test_a_crowded_memo_answers_along_its_probe_chains() -> None:
    memo = OfferedUrls(first_slots=8, max_slots=8)  # 6 held in 8 slots: long chains
    held = [f"http://a.test/{n}" for n in range(6)]
    memo.add(held)
    assert all(memo.seen(url) for url in held)
    assert not any(memo.seen(f"http://b.test/{n}") for n in range(200))


def test_a_link_refused_for_its_depth_is_admitted_from_a_shallower_page() -> None:
    # What a URL's rules say is kept per URL (decision 0058); the depth is the page's.
    front = frontier(max_depth=1)
    deep, _, refused = front.new_requests(["http://shop.test/b"], PAGE)
    assert (deep, refused) == ([], {"dropped.max_depth": 1})
    shallow, _, _ = front.new_requests(["http://shop.test/b"], None)
    assert [(r.url, r.depth) for r in shallow] == [("http://shop.test/b", 0)]


def test_the_memo_holds_a_url_with_a_lone_surrogate_and_refuses_what_is_not_a_str() -> None:
    memo = OfferedUrls(first_slots=8)
    memo.add(["http://shop.test/a\udcff", "http://shop.test/b"])  # bytes a page could not decode
    assert memo.seen("http://shop.test/a\udcff")
    assert not memo.seen("http://shop.test/a")
    with pytest.raises(TypeError, match="must be a str, not bytes"):
        memo.seen(b"http://shop.test/b")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be a str, not int"):
        memo.add(["http://shop.test/c", 1])  # type: ignore[list-item]
    assert len(memo) == 3  # what came before the bad one is held


@pytest.mark.parametrize(("first", "most"), [(6, 64), (0, 64), (16, 8)])
def test_the_table_sizes_must_be_a_power_of_two_and_in_order(first: int, most: int) -> None:
    with pytest.raises(ValueError, match="power of two"):
        OfferedUrls(first_slots=first, max_slots=most)
