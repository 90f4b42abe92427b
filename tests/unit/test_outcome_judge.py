"""The outcome judge's rules (``monitoring/outcome.py``) over figures made by hand."""

from __future__ import annotations

from crawlfleet.counters import CrawlStats
from crawlfleet.monitoring.outcome import Finding, RunFacts, judge


def facts(**changes: object) -> RunFacts:
    ok = CrawlStats({"outcome.ok": 3, "attempts": 3, "items.stored.page": 3})
    base: dict[str, object] = {
        "seed_domains": ["example.com"],
        "stats": ok,
        "run": ok,
        "domains": {"example.com": ok},
        "dead": 0,
        "done": 3,
        "dead_classes": {},
        "failures": [],
        "target": "--state s",
        "distributed": False,
    }
    return RunFacts(**{**base, **changes})  # type: ignore[arg-type]


def test_a_run_that_got_its_pages_has_nothing_to_say() -> None:
    assert judge(facts()) == []


def test_pages_without_items_name_the_parsers_option_of_the_runtime() -> None:
    pages = CrawlStats({"outcome.ok": 3, "attempts": 3})
    embedded = judge(facts(stats=pages, run=pages, domains={"example.com": pages}))
    assert embedded == [
        Finding(
            "nothing-stored",
            "no item stored: 3 pages ok, but no parser returned an item; check --parsers",
            True,
        )
    ]
    distributed = judge(facts(stats=pages, run=pages, distributed=True))
    assert "check the worker's --parsers" in distributed[0].line


def test_dead_letters_of_several_classes_are_requeued_together_on_a_distributed_crawl() -> None:
    found = judge(
        facts(
            dead=3,
            dead_classes={"example.com": {"HTTP 500": 2}, "other.org": {"timeout": 1}},
            target="--redis redis://h --crawl-id c",
            distributed=True,
        )
    )
    assert found == [
        Finding(
            "dead-letters",
            "3 URLs dead-lettered (HTTP 500 2, timeout 1); retry them: crawlfleet dlq requeue"
            " --redis redis://h --crawl-id c, then run the same crawl command again",
            True,
        )
    ]


def test_a_seed_domain_with_only_skipped_pages_says_so() -> None:
    skipped = CrawlStats({"outcome.skipped": 2, "attempts": 2})
    found = judge(facts(domains={"example.com": skipped}))
    assert found[0] == Finding(
        "seed-empty",
        "seed domain example.com: 0 pages ok: 2 pages skipped (robots.txt disallows them, or a"
        " hook dropped them)",
        True,
    )


def test_a_blocked_class_points_at_the_hard_targets() -> None:
    nothing = CrawlStats({"outcome.dead": 1, "attempts": 1})
    found = judge(
        facts(
            stats=nothing,
            run=nothing,
            domains={"example.com": nothing},
            dead=1,
            dead_classes={"example.com": {"blocked: HTTP 403": 1}},
        )
    )
    assert found[0].line == (
        "seed domain example.com: 0 pages ok: 1 dead-lettered (blocked: HTTP 403: the site "
        "refuses crawlers: see the README's Hard targets (proxies, the ladder))"
    )


def test_a_revisit_with_nothing_due_says_so_and_not_to_recrawl() -> None:
    found = judge(facts(run=CrawlStats(), revisit="pass"))
    assert found == [
        Finding(
            "resumed-complete",
            "nothing to do: no known page is due for a revisit yet (recrawl_after)",
            False,
        )
    ]


def test_pages_that_missed_their_parsers_expectations_name_resume_parser_per_domain() -> None:
    (found,) = judge(
        facts(
            dead=5,
            dead_classes={"example.com": {"mismatch: item": 4}, "other.org": {"HTTP 500": 1}},
        )
    )
    assert found.line == (
        "5 URLs dead-lettered (mismatch: item 4, HTTP 500 1); retry them: crawlfleet dlq "
        "requeue --state s, then crawl again; pages that missed their parser's expectations: "
        "fix the parser, then crawlfleet resume-parser item example.com --state s"
    )
