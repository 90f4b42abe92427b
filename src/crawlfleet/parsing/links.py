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
from functools import lru_cache

from selectolax.lexbor import LexborHTMLParser, LexborNode

from crawlfleet.models import Link, found_link
from crawlfleet.urls import C0_CONTROL_OR_SPACE, URL_CACHE_SIZE, already_canonical, join

LINK_SELECTOR = "a[href], area[href]"
# What one walk of a page finds: its links, its first <base href>, its <meta name="robots">.
_PAGE_SELECTOR = f"{LINK_SELECTOR}, base[href], meta[name]"
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
        tokens.update(_robots_tokens(node.attributes))
    if "none" in tokens:
        return RobotsMeta(noindex=True, nofollow=True)
    return RobotsMeta(noindex="noindex" in tokens, nofollow="nofollow" in tokens)


def _robots_tokens(attrs: dict[str, str | None]) -> list[str]:
    """The directives of a ``<meta>`` element if it is ``name="robots"``."""
    if (attrs.get("name") or "").strip().lower() != "robots":
        return []
    return [token.strip() for token in (attrs.get("content") or "").lower().split(",")]


def base_url(tree: LexborHTMLParser, page_url: str, encoding: str = "utf-8") -> str:
    """The URL relative links resolve against: ``<base href>`` if usable, else ``page_url``.

    ``encoding``: the page's Python codec (see ``urls.join``)."""
    node = tree.css_first("base[href]")
    return _base_of(node.attributes.get("href") if node is not None else None, page_url, encoding)


def _base_of(href: str | None, page_url: str, encoding: str) -> str:
    """``base_url`` for the first ``<base>``'s href."""
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
    return _resolved(base, href, origin, encoding)


def _resolved(base: str, href: str, origin: str | None, encoding: str) -> str | None:
    """``resolve`` for an href stripped of C0 controls and spaces, not fragment-only."""
    if origin is not None and href.isascii() and _plain(href):
        return (href if href[0] != "/" else origin + href).partition("#")[0]
    url = join(base, href, encoding)
    if url is None:
        return None
    scheme = url.partition(":")[0]
    if scheme not in _WEB_SCHEMES and not (scheme == "file" and base.startswith("file:")):
        return None
    return url.partition("#")[0]


def _without_fragment(href: str) -> str:
    """``href`` (stripped) without its fragment, unless a space or control comes before the
    ``#``: the URL parser keeps that one (``/a #x`` is ``/a%20``), and strips it from an
    href that ends there (``/a `` is ``/a``)."""
    cut = href.partition("#")[0]
    return cut if not cut or cut[-1] > " " else href


def _directory_of(base: str) -> str | None:
    """The directory of a plain http(s) base URL (``urls.already_canonical``: serialized, no
    query, no dot segment): what an href resolves against unless it is empty or a query;
    None for other bases."""
    return base[: base.rfind("/") + 1] if already_canonical(base) else None


@lru_cache(maxsize=URL_CACHE_SIZE)
def _resolved_in(directory: str, href: str, origin: str | None, encoding: str) -> str | None:
    """``_resolved`` against any base in ``directory`` (``_directory_of``) for an href that is
    not a query, cached: the pages of a directory share most of their hrefs (navigation,
    siblings), and a hit (~0.1 µs) saves a WHATWG join (~1.5 µs)."""
    return _resolved(directory, href, origin, encoding)


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
    if css_regions:
        if robots_meta(tree).nofollow:
            return []
        base = base_url(tree, page_url, encoding)
        anchors = [
            a for region in css_regions for r in tree.css(region) for a in r.css(LINK_SELECTOR)
        ]
    else:
        page_parts = _page_parts(tree)
        if page_parts is None:
            return []
        base_href, anchors = page_parts
        base = _base_of(base_href, page_url, encoding)
    origin = origin_of(base)
    directory = _directory_of(base)
    # An href is resolved once a page: most repeat (javadoc's 329 links a page hold 41
    # URLs, the Python docs' 2,454 hold 77, each its fragments apart).
    hrefs: set[str] = set()
    seen: set[str] = set()
    links: list[Link] = []
    for node in anchors:
        attrs = node.attributes  # one element's at a time: a 6 MB page holds 28,000 links
        rel = attrs.get("rel")
        if rel and "nofollow" in rel.lower().split():
            continue
        href = attrs.get("href")
        if not href:
            continue
        href = _without_fragment(href.strip(C0_CONTROL_OR_SPACE))
        if href in hrefs:
            continue
        hrefs.add(href)
        if not href:  # a fragment-only href
            continue
        if directory is None or href[0] == "?":
            url = _resolved(base, href, origin, encoding)
        else:
            url = _resolved_in(directory, href, origin, encoding)
        if url is not None and url not in seen:
            seen.add(url)
            links.append(found_link(url, priority, fetcher))
    return links


def _page_parts(tree: LexborHTMLParser) -> tuple[str | None, list[LexborNode]] | None:
    """The first ``<base href>`` and the link elements of the page, in one walk of the tree
    (one ~0.2 ms a 100 KB page; three walks took three); None for a page whose
    ``<meta name="robots">`` says ``nofollow``."""
    base_href: str | None = None
    tokens: set[str] = set()
    anchors = []
    for node in tree.css(_PAGE_SELECTOR):
        tag = node.tag
        if tag == "a" or tag == "area":
            anchors.append(node)
        elif tag == "base":
            if base_href is None:
                base_href = node.attributes.get("href")
        else:
            tokens.update(_robots_tokens(node.attributes))
    if "nofollow" in tokens or "none" in tokens:
        return None
    return base_href, anchors
