"""Field processors of declarative parsers: ``process = [...]`` on a field, applied in order.

Each step is a name or a one-key table with its argument::

    fields.price = { css = "p.price", process = ["strip", "price"] }
    fields.tags  = { css = "a.tag", all = true, process = ["strip", { join = ", " }] }
    fields.year  = { css = ".date", process = [{ regex = "(\\d{4})" }, "number"] }
    fields.link  = { css = "a", attr = "href", process = ["absolute_url"] }
    fields.stock = { css = ".stock", process = ["number", { default = 0 }] }
    fields.when  = { css = ".posted", process = [{ date = "%d %B %Y" }] }

=================  ==========================================================================
step               what it does (to each string of a list field, unless said otherwise)
=================  ==========================================================================
``strip``          trims the ends and makes every whitespace run one space
``join``           a list field becomes one string, joined by the argument (default ``" "``)
``regex``          the first group of the argument's first match (or the whole match); no
                   match: None
``number``         the first number in the text (``"1,234.50 left"`` -> 1234.5), an int when
                   it has no fraction; none: None
``price``          ``{"amount": "51.77", "currency": "GBP"}`` (``pipeline.prices``); the
                   argument is the default currency; no price: None
``date``           ISO 8601 (``pipeline.dates``: ISO, RFC 2822, epoch, then the argument's
                   ``strptime`` formats, a string or a list); not a date: None
``absolute_url``   resolved against the page's base URL
``default``        the whole value, when it is None or an empty string or list, becomes the
                   argument
=================  ==========================================================================

Steps run after ``re`` and ``type``; None passes every step but ``default`` unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import urljoin

from crawlfleet.errors import ConfigError
from crawlfleet.patterns import Pattern, compile_pattern
from crawlfleet.pipeline.dates import DEFAULT_FORMATS, to_iso
from crawlfleet.pipeline.prices import parse_price

STEPS = ("strip", "join", "regex", "number", "price", "date", "absolute_url", "default")
_NEEDS_ARGUMENT = frozenset({"regex", "default"})
_NUMBER = re.compile(r"[-+]?(?:\d[\d,_' ]*)?\.?\d+(?:[eE][-+]?\d+)?")

StepDeclaration = str | Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Context:
    """What a step may need besides the value: the page's base URL."""

    base_url: str


@dataclass(frozen=True, slots=True)
class Step:
    """One compiled step; ``whole`` steps see the whole value, the others each string."""

    name: str
    apply: Callable[[Any, Context], Any]
    whole: bool = False


def compile_steps(declarations: Sequence[StepDeclaration]) -> tuple[Step, ...]:
    """The steps of a ``process`` list; ``ValueError`` names the bad one (a pydantic error)."""
    return tuple(_compile(declaration) for declaration in declarations)


def run_steps(steps: Sequence[Step], value: Any, context: Context) -> Any:
    for step in steps:
        if step.whole:
            value = step.apply(value, context)
        elif isinstance(value, list):
            value = [step.apply(v, context) if v is not None else None for v in value]
        elif value is not None:
            value = step.apply(value, context)
    return value


def _compile(declaration: StepDeclaration) -> Step:
    if isinstance(declaration, str):
        name, argument, given = declaration, None, False
    elif isinstance(declaration, Mapping) and len(declaration) == 1:
        [(name, argument)] = declaration.items()
        given = True
    else:
        raise ValueError(f"a step is a name or a one-key table, not {declaration!r}")
    if name not in STEPS:
        raise ValueError(f"unknown step {name!r} (known: {', '.join(STEPS)})")
    if name in _NEEDS_ARGUMENT and not given:
        raise ValueError(f"step {name!r} needs an argument: {{ {name} = ... }}")
    return _BUILDERS[name](argument)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


def _strip(_: Any) -> Step:
    return Step("strip", lambda value, _c: " ".join(_text(value).split()))


def _join(argument: Any) -> Step:
    separator = " " if argument is None else str(argument)

    def join(value: Any, _c: Context) -> Any:
        if isinstance(value, list):
            return separator.join(_text(v) for v in value if v is not None)
        return value

    return Step("join", join, whole=True)


def _regex(argument: Any) -> Step:
    if not isinstance(argument, str):
        raise ValueError("step 'regex' needs a pattern string")
    try:
        pattern: Pattern = compile_pattern(argument, "step 'regex'")
    except ConfigError as exc:
        raise ValueError(str(exc)) from None

    def search(value: Any, _c: Context) -> Any:
        found = pattern.search(_text(value))
        if found is None:
            return None
        return found.group(1) if pattern.groups else found.group(0)

    return Step("regex", search)


def _number(_: Any) -> Step:
    def number(value: Any, _c: Context) -> Any:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return value
        found = _NUMBER.search(_text(value))
        if found is None:
            return None
        digits = re.sub(r"[,_' ]", "", found.group(0))
        try:
            parsed = Decimal(digits)
        except InvalidOperation:
            return None
        return int(parsed) if parsed == parsed.to_integral_value() else float(parsed)

    return Step("number", number)


def _price(argument: Any) -> Step:
    currency = None if argument is None else str(argument)

    def price(value: Any, _c: Context) -> Any:
        found = parse_price(_text(value), default_currency=currency)
        return found.to_dict() if found is not None else None

    return Step("price", price)


def _date(argument: Any) -> Step:
    extra = [argument] if isinstance(argument, str) else list(argument or [])
    formats = (*DEFAULT_FORMATS, *extra)
    return Step("date", lambda value, _c: to_iso(value, formats))


def _absolute_url(_: Any) -> Step:
    return Step("absolute_url", lambda value, c: urljoin(c.base_url, _text(value).strip()))


def _default(argument: Any) -> Step:
    def default(value: Any, _c: Context) -> Any:
        return argument if value is None or value == "" or value == [] else value

    return Step("default", default, whole=True)


_BUILDERS: dict[str, Callable[[Any], Step]] = {
    "strip": _strip,
    "join": _join,
    "regex": _regex,
    "number": _number,
    "price": _price,
    "date": _date,
    "absolute_url": _absolute_url,
    "default": _default,
}
