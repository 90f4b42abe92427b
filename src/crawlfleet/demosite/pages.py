"""Small HTML building blocks shared by the demo site's roles."""

from __future__ import annotations

from collections.abc import Iterable
from html import escape

from aiohttp import web

HTML_TYPE = "text/html"


def page(title: str, body: str, head: str = "") -> str:
    """A complete HTML document; ``body`` and ``head`` are already-escaped markup."""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{escape(title)}</title>\n{head}</head>\n"
        f"<body>\n{body}\n</body>\n</html>\n"
    )


def link(href: str, text: str, rel: str | None = None, css_class: str | None = None) -> str:
    rel_attr = f' rel="{escape(rel)}"' if rel else ""
    class_attr = f' class="{escape(css_class)}"' if css_class else ""
    return f'<a href="{escape(href)}"{rel_attr}{class_attr}>{escape(text)}</a>'


def link_list(links: Iterable[tuple[str, str]]) -> str:
    """A ``<ul>`` of ``(href, text)`` links."""
    items = "".join(f"<li>{link(href, text)}</li>\n" for href, text in links)
    return f"<ul>\n{items}</ul>"


def html_response(markup: str, status: int = 200) -> web.Response:
    return web.Response(text=markup, status=status, content_type=HTML_TYPE, charset="utf-8")


def simple_page(title: str, links: Iterable[tuple[str, str]] = ()) -> web.Response:
    """A page with a heading, one paragraph naming it, and a list of links."""
    body = f"<h1>{escape(title)}</h1>\n<p>This is {escape(title)}.</p>\n{link_list(links)}"
    return html_response(page(title, body))


def robots_response(text: str) -> web.Response:
    return web.Response(text=text, content_type="text/plain", charset="utf-8")
