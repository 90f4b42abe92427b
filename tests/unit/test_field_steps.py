"""Field processors (``process = [...]``) of declarative parsers."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from crawlfleet.errors import ConfigError
from crawlfleet.models import FetchResult
from crawlfleet.parsing import selector_parser

PAGE = """<html><head><base href="http://shop.example/catalogue/"></head><body>
<div class="product">
  <h3>  Tea
     pot  </h3>
  <p class="price">Price: £1,204.50</p>
  <p class="stock">In stock (1,204 available)</p>
  <p class="rating">4.0 stars</p>
  <p class="posted">3 March 2024</p>
  <a class="tag">  green </a><a class="tag">black</a>
  <a class="more" href="tea_1/index.html">more</a>
</div>
<div class="product">
  <h3>Mug</h3>
  <p class="price">ask us</p>
  <p class="posted">soon</p>
</div>
</body></html>"""

DECLARATION = r"""
name = "products"
domain = "shop.example"
item_css = "div.product"
fields.name = { css = "h3", attr = "html", process = [{ regex = '<h3>([^<]*)</h3>' }, "strip"] }
fields.price = { css = "p.price", process = [{ price = "GBP" }] }
fields.stock = { css = "p.stock", process = ["number", { default = 0 }] }
fields.rating = { css = "p.rating", process = ["number"] }
fields.posted = { css = "p.posted", process = [{ date = "%d %B %Y" }] }
fields.tags = { css = "a.tag", all = true, process = ["strip", { join = ", " }, { default = "none" }] }
fields.url = { css = "a.more", attr = "href", process = ["absolute_url"] }
"""


def parse(declaration: str) -> list[dict[str, Any]]:
    spec = selector_parser(tomllib.loads(declaration))
    result = FetchResult(
        "http://shop.example/x",
        "http://shop.example/x",
        200,
        {"content-type": "text/html"},
        PAGE.encode(),
        0.0,
    )
    return [item.data for item in spec.parse(result).items]


def test_every_step_in_order() -> None:
    tea, mug = parse(DECLARATION)
    assert tea == {
        "name": "Tea pot",
        "price": {"amount": "1204.50", "currency": "GBP"},
        "stock": 1204,
        "rating": 4,
        "posted": "2024-03-03",
        "tags": "green, black",
        "url": "http://shop.example/catalogue/tea_1/index.html",
    }
    assert mug == {
        "name": "Mug",
        "price": None,
        "stock": 0,
        "rating": None,
        "posted": None,
        "tags": "none",
        "url": None,
    }


@pytest.mark.parametrize(
    ("process", "message"),
    [
        ('["shout"]', "unknown step 'shout'"),
        ('["regex"]', "step 'regex' needs an argument"),
        ("[{ regex = '(' }]", "regex"),
        ("[{ strip = 1, join = 2 }]", "one-key table"),
    ],
)
def test_a_bad_step_is_a_config_error_naming_the_field(process: str, message: str) -> None:
    declaration = f'name = "p"\ndomain = "d"\nfields.f = {{ css = "h3", process = {process} }}\n'
    with pytest.raises(ConfigError, match=r"selector parser 'p': fields\.f") as error:
        parse(declaration)
    assert message in str(error.value)
