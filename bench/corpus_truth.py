"""The ground truth of a static documentation site, computed from its files, not by a crawler.

What a polite crawler that starts at the seed must request from nginx serving ``root``:
every URL reachable through ``<a href>`` / ``<area href>`` links of the HTML pages (files
ending ``.html``, the only ones nginx serves as ``text/html``), within the site, minus what
robots.txt disallows. Independent of crawlfleet on purpose: another HTML parser (the
standard library's ``html.parser``, not lexbor) and a URL resolver of its own (RFC 3986
reference resolution with the WHATWG URL standard's input clean-up, not ``urljoin``).

How each case is read (what nginx answers, and what a crawler is asked to do about it):

- fragments are stripped; a fragment-only or empty href is the page itself;
- a query is part of the URL (nginx serves the path's file, the crawler must request it as
  a URL of its own); relative links on that page resolve against the URL with its query;
- the first ``<base href>`` of a page, resolved against the page URL, is the base of its
  links; other hosts, other ports and non-http(s) schemes are off the site;
- ``/dir`` naming a directory is a 301 to ``/dir/`` (both must be requested); ``/dir/``
  serves ``dir/index.html``, or 403 when the directory has none; a path naming no file
  is a 404;
- **required** (exactly once): the reachable HTML pages, the directory redirects, and links
  to a missing page (404/403 on a path ending in ``.html``, ``.htm``, ``/`` or with no
  extension): a crawler must request them to know;
- **optional** (at most once): linked files that are not HTML (``.txt``, ``.gz``,
  ``.png``, ...: crawlers skip extensions by their own lists), their 404s, and links a
  crawler may skip by the page's markup: ``rel="nofollow"`` and every link of a page whose
  ``<meta name="robots">`` says ``nofollow``/``none`` (counted; not followed further);
- robots.txt is matched as the bench writes it: ``Disallow`` prefixes of one
  ``User-agent: *`` group (no wildcards), against the request path and query.

Requests are compared by a key: each percent-escape of an unreserved character decoded,
the other escapes upper-cased, and bytes outside the URL code points escaped, so ``%7E``
and ``~`` are one URL but ``%2F`` and ``/`` are not.
"""

from __future__ import annotations

import re
import time
from collections import deque
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote_to_bytes

_ASCII_WS = "\t\n\f\r "
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
_ESCAPE = re.compile(rb"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
# Bytes kept as they are in a request key: unreserved, sub-delims, ':', '@', '/', '?', '%'.
_KEPT = _UNRESERVED | frozenset(b"!$&'()*+,;=:@/?%")
_DEFAULT_PORTS = {"http": "80", "https": "443"}
HTML_LIKE_SUFFIXES = frozenset({"", ".html", ".htm"})


@dataclass(frozen=True)
class Url:
    """An absolute http(s) URL split as the truth needs it; ``query`` keeps its ``?``."""

    scheme: str
    authority: str  # host[:port], lower-case host, default port dropped
    path: str
    query: str

    @property
    def target(self) -> str:
        """The request target (path and query) as it goes on the wire."""
        return self.path + self.query


def _escape(text: str) -> str:
    """Non-ASCII as UTF-8 escapes, and the characters a browser escapes in a path or query."""
    out = []
    for byte in text.encode("utf-8", "surrogateescape"):
        char = chr(byte)
        if byte < 0x21 or byte > 0x7E or char in '"<>`{}':
            out.append(f"%{byte:02X}")
        else:
            out.append(char)
    return "".join(out)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4 (``%2e`` counts as a dot, as in the WHATWG parser)."""
    segments = path.split("/")
    out: list[str] = []
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        lowered = segment.lower()
        if lowered in (".", "%2e"):
            if last:
                out.append("")
        elif lowered in ("..", ".%2e", "%2e.", "%2e%2e"):
            if len(out) > 1:
                out.pop()
            if last:
                out.append("")
        else:
            out.append(segment)
    joined = "/".join(out)
    return joined if joined.startswith("/") else "/" + joined


def parse_absolute(url: str) -> Url | None:
    """An absolute http(s) URL (already cleaned), or None for any other scheme."""
    found = _SCHEME.match(url)
    if found is None or found.group(1).lower() not in _DEFAULT_PORTS:
        return None
    scheme = found.group(1).lower()
    rest = url[found.end() :].lstrip("/")  # special schemes ignore any number of slashes
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    authority, rest = rest[:cut], rest[cut:]
    authority = authority.rpartition("@")[2].lower()
    host, colon, port = authority.rpartition(":") if "]" not in authority[-1:] else ("", "", "")
    if colon and port.isdigit():
        authority = host if port.lstrip("0") == _DEFAULT_PORTS[scheme] else f"{host}:{int(port)}"
    path, mark, query = rest.partition("?")
    return Url(scheme, authority, _escape(_remove_dot_segments(path)), mark + _escape(query))


def resolve(base: Url, href: str) -> Url | None:
    """``href`` resolved against ``base`` without its fragment; None off http(s).

    Input clean-up as the WHATWG URL parser does it: leading and trailing C0 controls and
    spaces stripped, tabs and newlines removed, ``\\`` read as ``/`` before the query.
    """
    href = href.strip("".join(map(chr, range(0x21)))).replace("\t", "")
    href = href.replace("\n", "").replace("\r", "").partition("#")[0]
    before, mark, after = href.partition("?")
    href = before.replace("\\", "/") + mark + after
    found = _SCHEME.match(href)
    if found is not None:
        scheme = found.group(1).lower()
        rest = href[found.end() :]
        if scheme != base.scheme or rest.startswith("/"):
            return parse_absolute(href)
        href = rest  # "http:foo" against an http base is relative (WHATWG)
    if href.startswith("//"):
        return parse_absolute(f"{base.scheme}:{href}")
    path, mark, query = href.partition("?")
    if not path:
        return Url(
            base.scheme, base.authority, base.path, mark + _escape(query) if mark else base.query
        )
    if not path.startswith("/"):
        path = base.path[: base.path.rfind("/") + 1] + path
    return Url(
        base.scheme, base.authority, _escape(_remove_dot_segments(path)), mark + _escape(query)
    )


def request_key(target: str) -> str:
    """The comparison key of a request target (see the module docstring)."""

    def one(found: re.Match[bytes]) -> bytes:
        byte = int(found.group(1), 16)
        return bytes([byte]) if byte in _UNRESERVED else b"%" + found.group(1).upper()

    raw = _ESCAPE.sub(one, target.encode("utf-8", "surrogateescape"))
    return "".join(chr(b) if b in _KEPT else f"%{b:02X}" for b in raw)


class _LinkParser(HTMLParser):
    """Collects ``a``/``area`` hrefs (with their nofollow flag), the first ``<base href>``
    and the ``<meta name=robots>`` tokens of one page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[str, bool]] = []
        self.base: str | None = None
        self.robots: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("a", "area"):
            values = dict(attrs)
            href = values.get("href")
            if href is not None:
                rel = (values.get("rel") or "").lower().split()
                self.links.append((href, "nofollow" in rel))
        elif tag == "base" and self.base is None:
            self.base = dict(attrs).get("href")
        elif tag == "meta":
            values = dict(attrs)
            if (values.get("name") or "").strip().lower() == "robots":
                content = (values.get("content") or "").lower()
                self.robots.update(token.strip() for token in content.split(","))


@dataclass(frozen=True)
class PageLinks:
    """What one HTML file links to, before resolution."""

    links: list[tuple[str, bool]]
    base: str | None
    nofollow_page: bool


def read_page(file: Path) -> PageLinks:
    parser = _LinkParser()
    parser.feed(file.read_bytes().decode("utf-8", errors="replace"))
    parser.close()
    nofollow_page = bool(parser.robots & {"nofollow", "none"})
    return PageLinks(parser.links, parser.base, nofollow_page)


@dataclass(frozen=True)
class Robots:
    """The bench's own robots.txt: ``Disallow`` prefixes of one ``User-agent: *`` group."""

    disallow: tuple[str, ...]

    def text(self) -> str:
        return "User-agent: *\n" + "".join(f"Disallow: {p}\n" for p in self.disallow)

    def forbids(self, key: str) -> bool:
        return any(key.startswith(prefix) for prefix in self.disallow)


@dataclass
class Truth:
    """Request keys a crawl must and may make, with the counts that explain them."""

    seed: str
    required: dict[str, int] = field(default_factory=dict)  # key -> expected status
    optional: dict[str, int] = field(default_factory=dict)
    disallowed_linked: set[str] = field(default_factory=set)
    pages: int = 0
    html_files: int = 0
    links_seen: int = 0
    offsite_links: int = 0
    nofollow_links: int = 0
    nofollow_pages: int = 0
    max_links_on_a_page: int = 0
    max_page_bytes: int = 0
    base_hrefs: int = 0
    query_urls: int = 0
    seconds: float = 0.0

    def summary(self) -> str:
        statuses: dict[int, int] = {}
        for status in self.required.values():
            statuses[status] = statuses.get(status, 0) + 1
        by_status = ", ".join(f"{n} x {s}" for s, n in sorted(statuses.items()))
        return (
            f"{len(self.required)} required URLs ({by_status}), {len(self.optional)} optional, "
            f"{len(self.disallowed_linked)} linked URLs robots.txt disallows; {self.pages} of "
            f"{self.html_files} HTML files reachable; {self.links_seen} links read "
            f"({self.offsite_links} off the site, {self.nofollow_links} rel=nofollow, "
            f"{self.nofollow_pages} meta-nofollow pages, {self.base_hrefs} <base href>, "
            f"{self.query_urls} URLs with a query); largest page "
            f"{self.max_page_bytes / 1e6:.1f} MB, most links on a page "
            f"{self.max_links_on_a_page}; computed in {self.seconds:.0f} s"
        )


def _status_of(root: Path, url: Url) -> tuple[int, Path | None]:
    """What nginx answers for ``url`` and the file it serves (None when it serves none)."""
    raw = unquote_to_bytes(url.path).decode("utf-8", "surrogateescape")
    relative = re.sub("/+", "/", raw).lstrip("/")  # nginx merges slashes
    file = root / relative
    if raw.endswith("/"):
        if not file.is_dir():
            return 404, None
        index = file / "index.html"
        return (200, index) if index.is_file() else (403, None)
    if file.is_dir():
        return 301, None
    return (200, file) if file.is_file() else (404, None)


def compute(root: Path, seed_path: str, robots: Robots, authority: str) -> Truth:
    """Breadth-first from ``seed_path`` over the files under ``root`` (served at ``authority``)."""
    started = time.monotonic()
    seed = Url("http", authority, seed_path, "")
    truth = Truth(seed=f"http://{authority}{seed_path}")
    truth.html_files = sum(1 for _ in root.rglob("*.html"))
    follows: dict[str, bool] = {request_key(seed.target): True}  # reached by a followable link
    done: set[str] = set()
    queue: deque[Url] = deque([seed])
    parsed: dict[Path, PageLinks] = {}
    while queue:
        url = queue.popleft()
        key = request_key(url.target)
        if key in done:
            continue
        done.add(key)
        follow = follows[key]
        status, file = _status_of(root, url)
        suffix = "" if url.path.endswith("/") else Path(url.path).suffix.lower()
        html = status == 200 and file is not None and file.suffix == ".html"
        required = follow and (
            html or status == 301 or (status != 200 and suffix in HTML_LIKE_SUFFIXES)
        )
        (truth.required if required else truth.optional)[key] = status
        truth.query_urls += bool(url.query)
        targets: list[tuple[Url, bool]] = []
        if status == 301:
            targets.append((Url(url.scheme, url.authority, url.path + "/", url.query), follow))
        elif html and follow and file is not None:
            truth.pages += 1
            page = parsed.get(file)
            if page is None:
                page = parsed[file] = read_page(file)
                truth.max_page_bytes = max(truth.max_page_bytes, file.stat().st_size)
            truth.links_seen += len(page.links)
            truth.max_links_on_a_page = max(truth.max_links_on_a_page, len(page.links))
            base = url
            if page.base is not None:
                truth.base_hrefs += 1
                base = resolve(url, page.base) or url
            truth.nofollow_pages += page.nofollow_page
            for href, nofollow in page.links:
                target = resolve(base, href)
                if target is None or (target.scheme, target.authority) != ("http", authority):
                    truth.offsite_links += 1
                    continue
                truth.nofollow_links += nofollow
                targets.append((target, not (nofollow or page.nofollow_page)))
        for target, follows_it in targets:
            target_key = request_key(target.target)
            if robots.forbids(target_key):
                truth.disallowed_linked.add(target_key)
            elif target_key not in follows:
                follows[target_key] = follows_it
                queue.append(target)
            elif follows_it and not follows[target_key]:
                # First reached by a nofollow link, now by a followable one: required after all.
                follows[target_key] = True
                if target_key in done:
                    done.discard(target_key)
                    truth.optional.pop(target_key, None)
                    queue.append(target)
    truth.seconds = time.monotonic() - started
    return truth
