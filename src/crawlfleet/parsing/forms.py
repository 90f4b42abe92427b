"""An HTML form turned into the request its submission would make (``Response.form``).

The form's successful controls are kept in document order, as a browser sends them: hidden
fields (a CSRF token), text inputs and text areas, checked check boxes and radio buttons,
selected options (the first option of a single select when none is). Disabled controls,
buttons and file inputs are not sent. ``fields`` replace the values of controls of the same
name (all of them) or are added at the end; a field set to None is left out. No submit
button's value is sent unless given in ``fields``.

``action`` resolves against the page's base URL (an empty or missing action is the page's
own URL). A GET form's fields become the action's query (replacing its own, as browsers
do); a POST form's become a URL-encoded body. ``multipart/form-data`` forms are refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

from selectolax.lexbor import LexborNode

from crawlfleet.models import FORM_CONTENT_TYPE, Link
from crawlfleet.urls import C0_CONTROL_OR_SPACE, join

FieldValue = str | int | float | list[str] | None
_NOT_SENT = frozenset({"submit", "button", "image", "reset", "file"})


def controls(form: LexborNode) -> list[tuple[str, str]]:
    """The (name, value) pairs the form would send as it is."""
    pairs: list[tuple[str, str]] = []
    for node in form.css("input, select, textarea"):
        attrs = node.attributes
        name = attrs.get("name")
        if not name or "disabled" in attrs:
            continue
        if node.tag == "textarea":
            pairs.append((name, node.text(deep=True)))
        elif node.tag == "select":
            pairs.extend((name, value) for value in _selected(node))
        else:
            kind = (attrs.get("type") or "text").lower()
            if kind in _NOT_SENT:
                continue
            if kind in ("checkbox", "radio") and "checked" not in attrs:
                continue
            default = "on" if kind in ("checkbox", "radio") else ""
            pairs.append((name, attrs.get("value") or default))
    return pairs


def _selected(select: LexborNode) -> list[str]:
    options = select.css("option")
    chosen = [o for o in options if "selected" in o.attributes]
    if not chosen and options and "multiple" not in select.attributes:
        chosen = options[:1]
    return [_option_value(o) for o in chosen]


def _option_value(option: LexborNode) -> str:
    value = option.attributes.get("value")
    return value if value is not None else " ".join(option.text(deep=True).split())


def merged(pairs: list[tuple[str, str]], fields: Mapping[str, FieldValue]) -> list[tuple[str, str]]:
    """``pairs`` with ``fields`` replacing (at the first place of their name) or added."""
    out: list[tuple[str, str]] = []
    placed: set[str] = set()
    for name, value in pairs:
        if name not in fields:
            out.append((name, value))
        elif name not in placed:
            placed.add(name)
            out.extend((name, v) for v in _values(fields[name]))
    for name, given in fields.items():
        if name not in placed:
            out.extend((name, v) for v in _values(given))
    return out


def _values(value: FieldValue) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list):
        return [str(v) for v in value]
    return [str(value)]


def form_link(
    form: LexborNode,
    base_url: str,
    page_url: str,
    fields: Mapping[str, FieldValue],
    data: Mapping[str, Any],
    priority: int = 0,
) -> Link:
    """The request submitting ``form`` with ``fields``; ``ValueError`` for a form it cannot
    submit (a multipart form, a method other than GET or POST)."""
    attrs = form.attributes
    method = (attrs.get("method") or "get").strip().upper()
    if method not in ("GET", "POST"):
        raise ValueError(f"form method {method!r} is not GET or POST")
    enctype = (attrs.get("enctype") or FORM_CONTENT_TYPE).strip().lower()
    if method == "POST" and enctype != FORM_CONTENT_TYPE:
        raise ValueError(f"form encoding {enctype!r} is not supported (only {FORM_CONTENT_TYPE})")
    action = (attrs.get("action") or "").strip(C0_CONTROL_OR_SPACE)
    url = (join(base_url, action) or action) if action else page_url
    pairs = merged(controls(form), fields)
    if method == "GET":
        parts = urlsplit(url)
        return Link(urlunsplit(parts._replace(query=urlencode(pairs), fragment="")), priority,
                    data=dict(data))  # fmt: skip
    headers = {"Content-Type": FORM_CONTENT_TYPE}
    return Link(url, priority, None, dict(data), "POST", urlencode(pairs), headers)
