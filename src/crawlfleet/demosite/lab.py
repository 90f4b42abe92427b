"""The lab role: crawler edge cases that finish quickly (the slow and hostile ones are hazards).

The home page links to ``HOME_LINKS`` only; nothing reachable from it leads to ``/hazards``.
Pages reachable only through the sitemaps are ``SITEMAP_ONLY_PATHS``.
"""

from __future__ import annotations

import gzip
from html import escape

from aiohttp import web

from crawlfleet.demosite.pages import (
    HTML_TYPE,
    html_response,
    link,
    link_list,
    page,
    robots_response,
    simple_page,
)
from crawlfleet.demosite.roles import SHOP, UrlFor

PAGE_COUNT = 10
BLOCKS_PAGES = 200
BLOCKS_FORBIDDEN: tuple[int, ...] = (1, 2, 3, 4, 5)
"""``/blocks/`` links ``/blocks/page/1..200`` with ``/blocks/forbidden/<n>`` (403) every
40 pages: a few blocked URLs among many good ones."""
SITEMAP_ONLY_PATHS: tuple[str, ...] = tuple(f"/from-sitemap/{n}" for n in range(1, 7))
NOFOLLOW_FOLLOWED: tuple[str, ...] = ("/nofollow/followed-1", "/nofollow/followed-2")
NOFOLLOW_HIDDEN: tuple[str, ...] = ("/nofollow/hidden-1", "/nofollow/hidden-2")
META_NOFOLLOW_HIDDEN: tuple[str, ...] = ("/meta-nofollow/hidden-1", "/meta-nofollow/hidden-2")
BASE_HREF_TARGETS: tuple[str, ...] = ("/sub/dir/a.html", "/sub/b.html")
HOME_LINKS: tuple[str, ...] = (
    "/page/1",
    "./page/2",
    "/page/1#top",
    "/nofollow",
    "/meta-nofollow",
    "/meta-noindex",
    "/base-href",
    "/bad-utf8",
    "/broken-html",
    "/binary.pdf",
    "/data.json",
    "/private/secret",
    "/tracking?id=1",
    "/tracking?utm_source=x&id=1",
    "/tracking?id=1&utm_medium=email&utm_campaign=spring",
    "/redirect/chain/3",
    "/redirect/to-linked",
    "/redirect/target",
    "/status/404",
    "/status/410",
    "mailto:lab@example.invalid",
    "javascript:void(0)",
    "tel:+10000000000",
)
ROBOTS_TXT = (
    "User-agent: *\nDisallow: /private/\n\n"
    "User-agent: BadBot\nDisallow: /\n\n"
    "Sitemap: {origin}/sitemap.xml\n"
)
_SITEMAP_NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
PDF_BYTES = (
    b"%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n"
    b"2 0 obj << /Type /Pages /Kids [] /Count 0 >> endobj\n"
    b"trailer << /Root 1 0 R >>\n%%EOF\n"
)
JSON_TEXT = '{"items": [{"id": 1, "href": "/page/9"}, {"id": 2, "href": "/page/10"}]}\n'
BAD_UTF8_BYTES = (
    b'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>Bad UTF-8 \xff\xfe</title>'
    b"</head><body><h1>Caf\xe9 \xc3\x28 \xed\xa0\x80</h1>"
    b'<p>Truncated \xe2\x82</p><a href="/page/5">five</a></body></html>\n'
)
BROKEN_HTML = (
    "<html><head><title>Broken</title><body><div><p>Unclosed <b>bold <i>italic\n"
    "<a href=\"/page/6\">six</a> <table><tr><td>cell <a href='/page/7'>seven<td>\n"
    "<<<>>> &bogus; </span></div></div></html></p><a href=/page/8>eight</a><div"
)


def origin(request: web.Request) -> str:
    """``scheme://host[:port]`` as the client addressed this server."""
    return f"{request.scheme}://{request.host}"


class Lab:
    """Request handlers of the lab's quick edge cases; ``url_for`` makes off-site links."""

    def __init__(self, url_for: UrlFor) -> None:
        self._url_for = url_for

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/", self.home),
            web.get("/robots.txt", self.robots),
            web.get("/sitemap.xml", self.sitemap_index),
            web.get("/sitemap-pages.xml", self.sitemap_pages),
            web.get("/sitemap-more.xml.gz", self.sitemap_more),
            web.get("/page/{number:\\d+}", self.numbered_page),
            web.get("/blocks/", self.blocks_index),
            web.get("/blocks/page/{number:\\d+}", self.blocks_page),
            web.get("/blocks/forbidden/{number:\\d+}", self.blocks_forbidden),
            web.get("/from-sitemap/{number:\\d+}", self.sitemap_only_page),
            web.get("/nofollow", self.nofollow),
            web.get("/meta-nofollow", self.meta_nofollow),
            web.get("/meta-noindex", self.meta_noindex),
            web.get("/base-href", self.base_href),
            web.get("/bad-utf8", self.bad_utf8),
            web.get("/broken-html", self.broken_html),
            web.get("/binary.pdf", self.binary_pdf),
            web.get("/data.json", self.data_json),
            web.get("/tracking", self.tracking),
            web.get("/redirect/chain/{hops:\\d+}", self.redirect_chain),
            web.get("/redirect/loop", self.redirect_loop),
            web.get("/redirect/loop-b", self.redirect_loop_b),
            web.get("/redirect/to-linked", self.redirect_to_linked),
            web.get("/redirect/offsite", self.redirect_offsite),
            web.get("/redirect/target", self.redirect_target),
            web.get(
                "/{section:nofollow|meta-nofollow|meta-noindex|sub|private}/{tail:.+}", self.leaf
            ),
        ]

    async def home(self, request: web.Request) -> web.Response:
        links = [(href, href) for href in HOME_LINKS]
        links.append((f"//{request.host}/page/3", "protocol-relative page 3"))
        links.append((self._url_for(SHOP, "/"), "the shop (another host)"))
        return html_response(page("Crawler lab", f"<h1>Crawler lab</h1>\n{link_list(links)}"))

    async def robots(self, request: web.Request) -> web.Response:
        return robots_response(ROBOTS_TXT.format(origin=origin(request)))

    async def sitemap_index(self, request: web.Request) -> web.Response:
        entries = "".join(
            f"<sitemap><loc>{origin(request)}{path}</loc></sitemap>\n"
            for path in ("/sitemap-pages.xml", "/sitemap-more.xml.gz")
        )
        xml = f'<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex xmlns="{_SITEMAP_NS}">\n'
        return web.Response(text=f"{xml}{entries}</sitemapindex>\n", content_type="application/xml")

    async def sitemap_pages(self, request: web.Request) -> web.Response:
        paths = ("/", "/page/1", "/page/2", *SITEMAP_ONLY_PATHS[:3])
        return web.Response(text=_urlset(origin(request), paths), content_type="application/xml")

    async def sitemap_more(self, request: web.Request) -> web.Response:
        xml = _urlset(origin(request), SITEMAP_ONLY_PATHS[3:]).encode()
        return web.Response(body=gzip.compress(xml, mtime=0), content_type="application/gzip")

    async def numbered_page(self, request: web.Request) -> web.Response:
        number = int(request.match_info["number"])
        if not 1 <= number <= PAGE_COUNT:
            raise web.HTTPNotFound()
        links = [("/", "home")]
        if number < PAGE_COUNT:
            links.append((f"/page/{number + 1}", "next"))
        return simple_page(f"Lab page {number}", links)

    async def blocks_index(self, request: web.Request) -> web.Response:
        links: list[tuple[str, str]] = []
        for number in range(1, BLOCKS_PAGES + 1):
            links.append((f"/blocks/page/{number}", f"page {number}"))
            if number % 40 == 0 and number // 40 in BLOCKS_FORBIDDEN:
                links.append((f"/blocks/forbidden/{number // 40}", "forbidden"))
        return simple_page("Blocks", links)

    async def blocks_page(self, request: web.Request) -> web.Response:
        number = int(request.match_info["number"])
        if not 1 <= number <= BLOCKS_PAGES:
            raise web.HTTPNotFound()
        return simple_page(f"Blocks page {number}", [("/blocks/", "index")])

    async def blocks_forbidden(self, request: web.Request) -> web.Response:
        if int(request.match_info["number"]) not in BLOCKS_FORBIDDEN:
            raise web.HTTPNotFound()
        raise web.HTTPForbidden(
            text="<html><title>Forbidden</title></html>", content_type=HTML_TYPE
        )

    async def sitemap_only_page(self, request: web.Request) -> web.Response:
        path = request.path
        if path not in SITEMAP_ONLY_PATHS:
            raise web.HTTPNotFound()
        return simple_page(f"Sitemap-only page {request.match_info['number']}")

    async def nofollow(self, request: web.Request) -> web.Response:
        followed = "".join(f"<li>{link(h, h)}</li>" for h in NOFOLLOW_FOLLOWED)
        hidden = "".join(
            f"<li>{link(h, h, rel=rel)}</li>"
            for h, rel in zip(NOFOLLOW_HIDDEN, ("nofollow", "noopener nofollow"), strict=True)
        )
        return html_response(page("Nofollow links", f"<ul>{followed}{hidden}</ul>"))

    async def meta_nofollow(self, request: web.Request) -> web.Response:
        head = '<meta name="robots" content="nofollow">\n'
        body = link_list((h, h) for h in META_NOFOLLOW_HIDDEN)
        return html_response(page("Meta nofollow", body, head=head))

    async def meta_noindex(self, request: web.Request) -> web.Response:
        head = '<meta name="robots" content="noindex">\n'
        body = "<h1>Do not index me</h1>\n" + link_list([("/meta-noindex/followed", "followed")])
        return html_response(page("Meta noindex", body, head=head))

    async def base_href(self, request: web.Request) -> web.Response:
        head = '<base href="/sub/dir/">\n'
        body = link_list([("a.html", "a (relative to base)"), ("../b.html", "b (parent of base)")])
        return html_response(page("Base href", body, head=head))

    async def bad_utf8(self, request: web.Request) -> web.Response:
        return web.Response(body=BAD_UTF8_BYTES, content_type=HTML_TYPE, charset="utf-8")

    async def broken_html(self, request: web.Request) -> web.Response:
        return web.Response(text=BROKEN_HTML, content_type=HTML_TYPE)

    async def binary_pdf(self, request: web.Request) -> web.Response:
        return web.Response(body=PDF_BYTES, content_type="application/pdf")

    async def data_json(self, request: web.Request) -> web.Response:
        return web.Response(text=JSON_TEXT, content_type="application/json")

    async def tracking(self, request: web.Request) -> web.Response:
        item = escape(request.query.get("id", ""))
        return simple_page(f"Tracked item {item}", [("/", "home")])

    async def redirect_chain(self, request: web.Request) -> web.Response:
        """``/redirect/chain/N``: N redirects (302, or ``?status=``), then a page."""
        hops = int(request.match_info["hops"])
        if hops == 0:
            return simple_page("End of the redirect chain")
        status = int(request.query.get("status", "302"))
        if status not in (301, 302, 303, 307, 308):
            raise web.HTTPBadRequest(text="status must be a redirect code")
        query = f"?status={status}" if "status" in request.query else ""
        location = f"/redirect/chain/{hops - 1}{query}"
        return web.Response(status=status, headers={"Location": location})

    async def redirect_loop(self, request: web.Request) -> web.Response:
        raise web.HTTPFound("/redirect/loop-b")

    async def redirect_loop_b(self, request: web.Request) -> web.Response:
        raise web.HTTPFound("/redirect/loop")

    async def redirect_to_linked(self, request: web.Request) -> web.Response:
        raise web.HTTPMovedPermanently("/redirect/target")

    async def redirect_offsite(self, request: web.Request) -> web.Response:
        raise web.HTTPFound(self._url_for(SHOP, "/"))

    async def redirect_target(self, request: web.Request) -> web.Response:
        return simple_page("Redirect target", [("/", "home")])

    async def leaf(self, request: web.Request) -> web.Response:
        """The targets of the nofollow, noindex, base-href and private pages."""
        return simple_page(f"Leaf {request.path}", [("/", "home")])


def _urlset(site_origin: str, paths: tuple[str, ...]) -> str:
    urls = "".join(f"<url><loc>{site_origin}{path}</loc></url>\n" for path in paths)
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="{_SITEMAP_NS}">\n{urls}</urlset>\n'
    )
