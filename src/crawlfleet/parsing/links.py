"""Link extraction from HTML: ``<a href>`` and ``<area href>``, resolved as a browser does.

Resolution follows the page's ``<base href>`` (itself resolved against the page URL) when
present, else the page URL, by the WHATWG URL Standard (``urls.join``): only C0 controls and
spaces are stripped from an href's ends (other white space is percent-encoded), backslashes
are slashes, and the query is encoded in the page's encoding. Skipped: empty and fragment-only
hrefs, ``rel`` containing ``nofollow``, and every scheme but http(s) (``file:`` only from a
``file:`` page), which drops ``javascript:``, ``mailto:``, ``tel:`` and ``data:``. A page whose
``<meta name="robots">`` says ``nofollow`` (or ``none``) gives no links at all. Every link
is extracted (the body's byte limit bounds them); ``parsing.budget`` caps the links of any
parser and counts what it cuts (decision 0043). Serialization, scope and dedup across pages
are the frontier's job (``UrlRules.target``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from selectolax.lexbor import LexborHTMLParser

from crawlfleet.models import Link, found_link
from crawlfleet.urls import C0_CONTROL_OR_SPACE, join

LINK_SELECTOR = "a[href], area[href]"
_WEB_SCHEMES = frozenset({"http", "https"})
# Backslashes, IPv6 brackets, removed controls, a space (kept inside a URL, stripped at its
# end): one search, ~0.14 µs a link (a generator over the characters took ~0.32).
_SLOW_CHARS = re.compile(r"[\\\[\]\t\r\n ]")


@dataclass(frozen=True, slots=True)
class RobotsMeta:
    """The page-level flags of ``<meta name="robots">``."""

    noindex: bool = False
    nofollow: bool = False


def parse_html(html: str | bytes) -> LexborHTMLParser:
    """A parsed HTML document; never raises on broken markup (bytes are read as UTF-8)."""
    if isinstance(html, bytes):
        html = html.decode("utf-8", errors="replace")
    return LexborHTMLParser(html)


def robots_meta(tree: LexborHTMLParser) -> RobotsMeta:
    """The union of the directives of every ``<meta name="robots">`` on the page."""
    tokens: set[str] = set()
    for node in tree.css("meta[name]"):
        attrs = node.attributes
        if (attrs.get("name") or "").strip().lower() == "robots":
            content = (attrs.get("content") or "").lower()
            tokens.update(token.strip() for token in content.split(","))
    if "none" in tokens:
        return RobotsMeta(noindex=True, nofollow=True)
    return RobotsMeta(noindex="noindex" in tokens, nofollow="nofollow" in tokens)


def base_url(tree: LexborHTMLParser, page_url: str, encoding: str = "utf-8") -> str:
    """The URL relative links resolve against: ``<base href>`` if usable, else ``page_url``.

    ``encoding``: the page's Python codec (see ``urls.join``)."""
    node = tree.css_first("base[href]")
    href = node.attributes.get("href") if node is not None else None
    if not href or not href.strip(C0_CONTROL_OR_SPACE):
        return page_url
    return join(page_url, href, encoding) or page_url


def origin_of(url: str) -> str | None:
    """``scheme://netloc`` of an http(s) URL, or None for other URLs."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in _WEB_SCHEMES:
        return None
    return f"{scheme}://{rest.split('/', 1)[0].split('?', 1)[0].split('#', 1)[0]}"


def resolve(
    base: str, href: str | None, origin: str | None = None, encoding: str = "utf-8"
) -> str | None:
    """``href`` made absolute against ``base`` without its fragment; None if not followable.

    ``encoding``: the page's Python codec, its query's encoding (``urls.join``). ``origin``
    (``origin_of(base)``) enables a fast path for the commonest hrefs, ASCII absolute http(s)
    URLs and root-relative paths without dot segments, which skips ``join`` (~2 µs each);
    the frontier serializes what it gives (``UrlRules.target``).
    """
    if not href:
        return None
    href = href.strip(C0_CONTROL_OR_SPACE)
    if not href or href[0] == "#":
        return None
    if origin is not None and href.isascii() and _plain(href):
        return (href if href[0] != "/" else origin + href).partition("#")[0]
    url = join(base, href, encoding)
    if url is None:
        return None
    scheme = url.partition(":")[0]
    if scheme not in _WEB_SCHEMES and not (scheme == "file" and base.startswith("file:")):
        return None
    return url.partition("#")[0]


def _plain(href: str) -> bool:
    """True if ``join`` would give ``href`` but for its serialization (which the frontier
    does) and a root-relative origin."""
    if href.startswith("/"):
        if href.startswith("//"):
            return False
    elif not href.startswith(("http://", "https://")):
        return False
    return (
        "/." not in href
        and "?#" not in href
        and not href.endswith("?")
        and _SLOW_CHARS.search(href) is None
    )


def extract_links(
    page: LexborHTMLParser | str | bytes,
    page_url: str,
    *,
    css_regions: Sequence[str] = (),
    priority: int = 0,
    fetcher: str | None = None,
    encoding: str = "utf-8",
) -> list[Link]:
    """The followable links of a page in document order (region by region), each URL once.

    ``page_url`` is the response's final URL; ``encoding`` the Python codec the page was
    decoded with (its links' queries are encoded in it). ``css_regions`` restricts extraction
    to links inside elements matching any of those selectors (the whole page when empty).
    """
    tree = page if isinstance(page, LexborHTMLParser) else parse_html(page)
    if robots_meta(tree).nofollow:
        return []
    base = base_url(tree, page_url, encoding)
    origin = origin_of(base)
    if css_regions:
        nodes = [
            a for region in css_regions for r in tree.css(region) for a in r.css(LINK_SELECTOR)
        ]
    else:
        nodes = tree.css(LINK_SELECTOR)
    seen: set[str] = set()
    links: list[Link] = []
    for node in nodes:
        attrs = node.attributes
        rel = attrs.get("rel")
        if rel and "nofollow" in rel.lower().split():
            continue
        url = resolve(base, attrs.get("href"), origin, encoding)
        if url is None or url in seen:
            continue
        seen.add(url)
        links.append(found_link(url, priority, fetcher))
    return links
