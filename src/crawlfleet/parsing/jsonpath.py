"""A small JSON path language for declarative parsers: names, indexes and wildcards.

Grammar (an optional ``$`` first, then steps; the first name needs no dot)::

    products            the value of key "products"
    price.amount        a key of a key
    products[0]         an element of a list (negative counts from the end)
    products[*].name    every element of a list (or every value of an object), then a key
    ["odd.key"]         a key written in quotes (for dots, brackets or spaces)

A path selects a list of values: a missing key, an index out of range or a step into a
value of the wrong kind selects nothing (never an error). No filters or functions: a parser
that needs them is better written as a plugin with ``response.json()``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

_STEP = re.compile(
    r"""\.?(?P<name>[^.\[\]"*]+)|\.?(?P<star>\*)|\[(?P<index>-?\d+)\]|\[(?P<all>\*)\]"""
    r"""|\["(?P<quoted>(?:[^"\\]|\\.)*)"\]"""
)

Step = str | int | None
"""A key, an index, or None for the wildcard."""


@dataclass(frozen=True, slots=True)
class JsonPath:
    """A compiled path; ``select`` applies it to a decoded JSON document."""

    text: str
    steps: tuple[Step, ...]

    def select(self, document: Any) -> list[Any]:
        values = [document]
        for step in self.steps:
            values = _apply(step, values)
            if not values:
                break
        return values

    def first(self, document: Any) -> Any:
        """The first value selected, or None."""
        found = self.select(document)
        return found[0] if found else None


def _apply(step: Step, values: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    for value in values:
        if step is None:
            if isinstance(value, list):
                out.extend(value)
            elif isinstance(value, dict):
                out.extend(value.values())
        elif isinstance(step, int):
            if isinstance(value, list) and -len(value) <= step < len(value):
                out.append(value[step])
        elif isinstance(value, dict) and step in value:
            out.append(value[step])
    return out


def compile_path(text: str) -> JsonPath:
    """The path ``text`` compiled; ``ValueError`` saying where it is malformed."""
    rest = text.strip()
    if rest.startswith("$"):
        rest = rest[1:]
    steps: list[Step] = []
    at = 0
    while at < len(rest):
        match = _STEP.match(rest, at)
        if match is None or match.end() == at:
            raise ValueError(f"bad JSON path {text!r} at {rest[at:]!r}")
        if match["name"] is not None:
            steps.append(match["name"].strip())
        elif match["index"] is not None:
            steps.append(int(match["index"]))
        elif match["quoted"] is not None:
            steps.append(re.sub(r"\\(.)", r"\1", match["quoted"]))
        else:
            steps.append(None)
        at = match.end()
    return JsonPath(text, tuple(steps))
