"""Parser contracts: run each parser on its ``sample_url`` and check what it got."""

from __future__ import annotations

import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from crawlfleet.errors import CrawlfleetError
from crawlfleet.models import FetchResult, ParseResult
from crawlfleet.parsing.plugins import Contract, ParserSpec
from crawlfleet.parsing.registry import ParserRegistry

Fetch = Callable[[str], Awaitable[FetchResult]]


@dataclass(frozen=True, slots=True)
class ContractReport:
    """The outcome of one parser's contract; ``problems`` is empty when it held."""

    parser: str
    url: str
    problems: tuple[str, ...]
    items: int = 0
    links: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems


def violations(contract: Contract, parsed: ParseResult) -> list[str]:
    """What ``parsed`` breaks in ``contract``, one message each."""
    problems = []
    count = len(parsed.items)
    if count < contract.min_items:
        problems.append(f"{count} items, expected at least {contract.min_items}")
    if contract.max_items is not None and count > contract.max_items:
        problems.append(f"{count} items, expected at most {contract.max_items}")
    if len(parsed.links) < contract.min_links:
        problems.append(f"{len(parsed.links)} links, expected at least {contract.min_links}")
    for field in contract.required_fields:
        missing = sum(item.data.get(field) in (None, "", [], {}) for item in parsed.items)
        if missing:
            problems.append(f"field {field!r} missing or empty in {missing} of {count} items")
    return problems


async def check_contract(spec: ParserSpec, fetch: Fetch) -> ContractReport:
    """Fetch ``spec.sample_url``, parse it and check the contract (no contract: must not raise)
    and the parser's expectations (``parsing/expect.py``)."""
    url = spec.sample_url or ""
    try:
        result = await fetch(url)
    except CrawlfleetError as exc:
        return ContractReport(spec.name, url, (f"fetch failed: {exc}",))
    if result.status >= 400:
        return ContractReport(spec.name, url, (f"sample page answered HTTP {result.status}",))
    try:
        parsed = spec.parse(result)
    except Exception as exc:
        last = traceback.format_exception_only(exc)[-1].strip()
        return ContractReport(spec.name, url, (f"parser raised {last}",))
    problems = violations(spec.contract or Contract(), parsed)
    problems += [f"expectation missed: {missing}" for missing in parsed.unmet]
    return ContractReport(spec.name, url, tuple(problems), len(parsed.items), len(parsed.links))


async def check_contracts(registry: ParserRegistry, fetch: Fetch) -> list[ContractReport]:
    """One report per parser with a ``sample_url``, in registry order."""
    return [
        await check_contract(spec, fetch) for spec in registry.specs if spec.sample_url is not None
    ]
