"""The quotes role: paginated quotes with author pages, tag pages and a login link."""

from __future__ import annotations

from html import escape

from aiohttp import web

from crawlfleet.demosite.pages import html_response, link, page, robots_response
from crawlfleet.demosite.quotes_data import (
    PAGE_COUNT,
    QUOTES,
    TAGS,
    Quote,
    author_by_name,
    author_by_slug,
    quotes_on_page,
)

ROBOTS_TXT = "User-agent: *\nDisallow:\n"


def tag_path(tag: str) -> str:
    return f"/tag/{tag}/"


class Quotes:
    """Request handlers of the quotes site."""

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/", self.home),
            web.get("/robots.txt", self.robots),
            web.get("/page/{number:\\d+}/", self.quotes_page),
            web.get("/author/{slug}/", self.author),
            web.get("/tag/{tag}/", self.tag),
            web.get("/login", self.login),
        ]

    async def robots(self, request: web.Request) -> web.Response:
        return robots_response(ROBOTS_TXT)

    async def home(self, request: web.Request) -> web.Response:
        body = f"<p>{len(QUOTES)} quotes. {link('/page/1/', 'Start reading')}</p>"
        return _render("Quotes", body)

    async def quotes_page(self, request: web.Request) -> web.Response:
        number = int(request.match_info["number"])
        quotes = quotes_on_page(number)
        if not quotes:
            raise web.HTTPNotFound()
        pager = []
        if number > 1:
            pager.append(f'<li class="previous">{link(f"/page/{number - 1}/", "← Previous")}</li>')
        if number < PAGE_COUNT:
            pager.append(f'<li class="next">{link(f"/page/{number + 1}/", "Next →")}</li>')
        body = _quote_list(quotes) + f'\n<nav><ul class="pager">{"".join(pager)}</ul></nav>'
        return _render(f"Quotes, page {number}", body)

    async def author(self, request: web.Request) -> web.Response:
        author = author_by_slug(request.match_info["slug"])
        if author is None:
            raise web.HTTPNotFound()
        body = (
            '<div class="author-details">\n'
            f'<h3 class="author-title">{escape(author.name)}</h3>\n'
            f'<p><strong>Born:</strong> <span class="author-born-date">{author.born_date}</span> '
            f'<span class="author-born-location">{escape(author.born_location)}</span></p>\n'
            f'<div class="author-description">{escape(author.description)}</div>\n'
            "</div>"
        )
        return _render(author.name, body)

    async def tag(self, request: web.Request) -> web.Response:
        tag = request.match_info["tag"]
        if tag not in TAGS:
            raise web.HTTPNotFound()
        body = f"<h3>Viewing tag: {escape(tag)}</h3>\n" + _quote_list(
            tuple(q for q in QUOTES if tag in q.tags)
        )
        return _render(f"Quotes tagged {tag}", body)

    async def login(self, request: web.Request) -> web.Response:
        body = (
            '<form method="post" action="/login"><input name="username">'
            '<input name="password" type="password"><input type="submit" value="Login"></form>'
        )
        return _render("Login", body)


def _quote_markup(quote: Quote) -> str:
    author = author_by_name(quote.author)
    tags = " ".join(link(tag_path(t), t, css_class="tag") for t in quote.tags)
    return (
        '<div class="quote" itemscope itemtype="http://schema.org/CreativeWork">\n'
        f'<span class="text" itemprop="text">“{escape(quote.text)}”</span>\n'
        f'<span>by <small class="author" itemprop="author">{escape(author.name)}</small> '
        f"{link(author.url_path, '(about)')}</span>\n"
        f'<div class="tags">Tags: <meta class="keywords" itemprop="keywords" '
        f'content="{",".join(quote.tags)}"> {tags}</div>\n'
        "</div>"
    )


def _quote_list(quotes: tuple[Quote, ...]) -> str:
    return "\n".join(_quote_markup(q) for q in quotes)


def _render(title: str, main: str) -> web.Response:
    body = (
        f'<div class="header"><h1>{link("/", "Quotes to Scrape")}</h1>'
        f"<p>{link('/login', 'Login')}</p></div>\n"
        f'<div class="col-md-8">\n{main}\n</div>\n'
        '<div class="tags-box"><h2>Top Ten tags</h2>'
        + "".join(f'<span class="tag-item">{link(tag_path(t), t)}</span>' for t in TAGS)
        + "</div>"
    )
    return html_response(page(f"{title} | Quotes", body))
