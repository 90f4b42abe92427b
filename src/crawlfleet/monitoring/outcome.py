"""The outcome judge: what a finished run got, what it lost, and the command that fixes each.

A run can end "complete" with nothing to show: every seed refused, a login that failed, URLs
buried in the dead-letter queue. ``judge`` reads the run's figures and says each such thing in
one plain line with its cause and its fix. A finding that means the run got nothing or lost
something is a **shortfall**: the crawl exits with ``SHORTFALL_EXIT`` unless told to accept it
(``crawlfleet crawl --allow-shortfall``). A note (a resumed crawl that had nothing left to do)
is said but does not change the exit code. What limits dropped is said by
``summary.dropped_line`` after these lines, and never changes the exit code either.

The rules, in the order their lines are printed:

=====================  ==========================================================  =========
kind                   when                                                        shortfall
=====================  ==========================================================  =========
``seed-empty``         a seed's domain ended with no page fetched ok               yes
``login``              a login failed (pages ended failed by ``LoginFailed``)      yes
``nothing-stored``     the crawl stored no item at all                             yes
``dead-letters``       dead letters are left, per error class, with the retry      yes
``resumed-complete``   this run fetched nothing: the crawl was already complete    no
=====================  ==========================================================  =========
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from crawlfleet.counters import CrawlStats
from crawlfleet.records import Outcome

SHORTFALL_EXIT = 5
"""The exit code of a crawl that finished but got nothing, or lost something (a shortfall)."""

_MEANINGS: Mapping[str, str] = {
    "forbidden address": "a loopback or private address, refused unless --allow-private-addresses",
    "robots unavailable": "robots.txt could not be read",
    "DNS": "the host name did not resolve",
    "connection refused": "nothing listens at that address",
}
"""What a dead-letter class means, for the classes a first crawl commonly meets."""

MISMATCH = "mismatch: "
"""The prefix of a dead-letter class of pages that missed their parser's expectations
(``monitoring/deadletters.error_class``); ``resume-parser`` re-opens a drift's."""

HARD_TARGETS = "the site refuses crawlers: see the README's Hard targets (proxies, the ladder)"


def _meaning(name: str) -> str:
    """``: what it means`` for a known dead-letter class, else nothing."""
    if name in _MEANINGS:
        return f": {_MEANINGS[name]}"
    return f": {HARD_TARGETS}" if name.startswith("blocked") else ""


_FLAGS: Mapping[str, str] = {"forbidden address": "--allow-private-addresses"}
"""The crawl option without which a dead-letter class comes back on the retry."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing the run should tell its user; ``shortfall`` when it changes the exit code."""

    kind: str
    line: str
    shortfall: bool


@dataclass(frozen=True, slots=True)
class RunFacts:
    """What the judge reads: the crawl's figures after the run, and how to address the crawl.

    ``stats``/``domains`` are totals of the whole crawl; ``run`` the counters of this run only.
    ``dead_classes`` holds per domain the dead letters by error class; ``failures`` the most
    frequent errors of pages that completed as failed. ``target`` is the options that name
    this crawl to ``crawlfleet dlq`` (``--state DIR`` or ``--redis URL --crawl-id ID``);
    ``revisit`` the run's mode (``settings.revisit``: ``off``, ``pass``, ``continuous``).
    """

    seed_domains: Sequence[str]
    stats: CrawlStats
    run: CrawlStats
    domains: Mapping[str, CrawlStats]
    dead: int
    done: int
    dead_classes: Mapping[str, Mapping[str, int]]
    failures: Sequence[tuple[str, int]]
    target: str
    distributed: bool
    revisit: str = "off"


def judge(facts: RunFacts) -> list[Finding]:
    """The findings of a run that ended complete, in the order of the module's table."""
    findings = _seed_domains(facts)
    findings += _logins(facts)
    if not facts.stats.items("stored"):
        findings.append(_nothing_stored(facts))
    findings += _dead_letters(facts)
    if facts.run.get("attempts") == 0 and facts.done + facts.dead:
        left = "; a resumed crawl does not retry its dead letters" if facts.dead else ""
        if facts.revisit != "off":
            line = "nothing to do: no known page is due for a revisit yet (recrawl_after)"
        else:
            line = (
                f"nothing to do: this crawl was already complete ({facts.done} done, "
                f"{facts.dead} dead-lettered before this run){left}; --fresh starts it over, "
                "--recrawl revisits its pages"
            )
        findings.append(Finding("resumed-complete", line, shortfall=False))
    return findings


def _seed_domains(facts: RunFacts) -> list[Finding]:
    found = []
    for domain in dict.fromkeys(facts.seed_domains):
        stats = facts.domains.get(domain, CrawlStats())
        if stats.pages:
            continue
        classes = facts.dead_classes.get(domain, {})
        if classes:
            name, count = max(classes.items(), key=lambda pair: (pair[1], pair[0]))
            meaning = _meaning(name)
            cause = f"{count} dead-lettered ({name}{meaning})"
        elif stats.get(f"outcome.{Outcome.FAILED.value}"):
            cause = f"{stats.get(f'outcome.{Outcome.FAILED.value}')} pages failed"
        elif stats.get(f"outcome.{Outcome.SKIPPED.value}"):
            cause = (
                f"{stats.get(f'outcome.{Outcome.SKIPPED.value}')} pages skipped "
                "(robots.txt disallows them, or a hook dropped them)"
            )
        else:
            cause = "no page was fetched"
        found.append(Finding("seed-empty", f"seed domain {domain}: 0 pages ok: {cause}", True))
    return found


def _logins(facts: RunFacts) -> list[Finding]:
    logins = [(error, n) for error, n in facts.failures if "login" in error.lower()]
    if not logins:
        return []
    error, count = logins[0]
    return [
        Finding(
            "login",
            f"login failed ({count} pages): {error}; fix the secret (--secrets or "
            "CRAWLFLEET_SECRET_*), then crawl again with --fresh",
            shortfall=True,
        )
    ]


def _nothing_stored(facts: RunFacts) -> Finding:
    stats = facts.stats
    redirects = stats.get("fetched.ok.3xx")
    invalid = sum(stats.items("invalid").values())
    if invalid:
        why = f"all {invalid} items were invalid (kept as rejects: crawlfleet rejects says why)"
    elif stats.pages and redirects == stats.pages:
        why = (
            f"the {redirects} pages ok were all redirects (3xx) to URLs seen before or out of "
            f"scope (a challenge? {HARD_TARGETS})"
        )
    elif stats.pages:
        parsers = "the worker's --parsers" if facts.distributed else "--parsers"
        why = f"{stats.pages} pages ok, but no parser returned an item; check {parsers}"
    else:
        why = "no page was fetched ok"
    return Finding("nothing-stored", f"no item stored: {why}", shortfall=True)


def _dead_letters(facts: RunFacts) -> list[Finding]:
    if not facts.dead:
        return []
    classes: dict[str, int] = {}
    for per_domain in facts.dead_classes.values():
        for name, count in per_domain.items():
            classes[name] = classes.get(name, 0) + count
    listed = ", ".join(f"{name} {n}" for name, n in sorted(classes.items(), key=lambda p: -p[1]))
    again = "run the same crawl command again" if facts.distributed else "crawl again"
    flags = sorted({_FLAGS[name] for name in classes if name in _FLAGS})
    if flags:
        again += " with " + " ".join(flags)
    retry = f"crawlfleet dlq requeue {facts.target}"
    if len(classes) == 1:
        retry = f"crawlfleet dlq requeue --class {shlex.quote(next(iter(classes)))} {facts.target}"
    resumes = [
        f"crawlfleet resume-parser {shlex.quote(name.removeprefix(MISMATCH))} "
        f"{shlex.quote(domain)} {facts.target}"
        for domain, per_domain in sorted(facts.dead_classes.items())
        for name in sorted(per_domain)
        if name.startswith(MISMATCH)
    ]
    mismatched = (
        "; pages that missed their parser's expectations: fix the parser, then "
        + "; ".join(resumes)
        if resumes
        else ""
    )
    return [
        Finding(
            "dead-letters",
            f"{facts.dead} URLs dead-lettered ({listed or 'classes unread'}); "
            f"retry them: {retry}, then {again}{mismatched}",
            shortfall=True,
        )
    ]
