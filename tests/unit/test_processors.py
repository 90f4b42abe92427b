"""The standard processors, item identity, prices and dates."""

from __future__ import annotations

import pydantic
import pytest

from crawlfleet.errors import DropItem
from crawlfleet.models import Item
from crawlfleet.pipeline.hashing import content_hash, item_key, record
from crawlfleet.pipeline.prices import parse_price
from crawlfleet.pipeline.processors import (
    InvalidItem,
    absolute_urls,
    clean_text,
    dedupe,
    iso_dates,
    normalize_price,
    validate,
)


@pytest.mark.parametrize(
    ("text", "amount", "currency"),
    [
        ("£51.77", "51.77", "GBP"),
        ("1.234,50 €", "1234.50", "EUR"),
        ("$10", "10", "USD"),
        ("US$ 1,234.56", "1234.56", "USD"),
        ("EUR 12,99", "12.99", "EUR"),
        ("12.500 EUR", "12500", "EUR"),
        ("CHF 1'234.50", "1234.50", "CHF"),
        ("1\u00a0234,5 zł", "1234.5", "PLN"),
        ("¥1000", "1000", "JPY"),
        ("R$ 9,90", "9.90", "BRL"),
        ("Price: 0.125", "0.125", None),
        ("-3.20 GBP", "-3.20", "GBP"),
        ("1,000,000", "1000000", None),
    ],
)
def test_parse_price(text: str, amount: str, currency: str | None) -> None:
    price = parse_price(text)
    assert price is not None
    assert (price.amount, price.currency) == (amount, currency)


def test_parse_price_without_a_number_is_none() -> None:
    assert parse_price("Sold out") is None


def test_normalize_price_rewrites_fields_and_keeps_json_safe() -> None:
    process = normalize_price(["price", "old_price", "missing"], default_currency="GBP")
    item = Item("product", {"price": "£51.77", "old_price": 60, "name": "x"})
    out = process(item)
    assert out.data == {
        "price": {"amount": "51.77", "currency": "GBP"},
        "old_price": {"amount": "60", "currency": "GBP"},
        "name": "x",
    }
    assert item.data["price"] == "£51.77"  # the input is untouched
    assert content_hash(out.data)  # JSON-serializable


def test_normalize_price_refuses_text_without_a_number() -> None:
    with pytest.raises(InvalidItem, match="price: not a price"):
        normalize_price(["price"])(Item("product", {"price": "call us"}))


def test_clean_text_removes_nul_characters_everywhere() -> None:
    item = Item("page", {"title": "a\x00b", "parts": ["\x00", {"x": "c&#0;\x00d"}]})
    assert clean_text(item).data == {"title": "ab", "parts": ["", {"x": "c\ufffdd"}]}


def test_clean_text_unescapes_collapses_and_normalizes_nested_strings() -> None:
    decomposed = "Cafe\u0301"
    item = Item(
        "product",
        {
            "title": "  Fish &amp; Chips&nbsp;\n\t deluxe ",
            "tags": [" a  b ", {"note": "x&lt;y"}, 3],
            "name": decomposed,
            "count": 2,
        },
    )
    out = clean_text(item)
    assert out.data["title"] == "Fish & Chips deluxe"
    assert out.data["tags"] == ["a b", {"note": "x<y"}, 3]
    assert out.data["name"] == "Café"
    assert len(out.data["name"]) == 4
    assert out.data["count"] == 2


def test_absolute_urls_resolves_against_the_item_url() -> None:
    process = absolute_urls(["image", "gallery"])
    item = Item(
        "product",
        {"image": "../img/a.png", "gallery": ["b.png", "https://cdn.example/c.png"]},
        url="http://shop.example/catalogue/p/index.html",
    )
    assert process(item).data == {
        "image": "http://shop.example/catalogue/img/a.png",
        "gallery": ["http://shop.example/catalogue/p/b.png", "https://cdn.example/c.png"],
    }


@pytest.mark.parametrize(
    ("value", "iso"),
    [
        ("2024-11-05", "2024-11-05"),
        ("2024-11-05T10:00:00Z", "2024-11-05T10:00:00+00:00"),
        ("Tue, 05 Nov 2024 10:00:00 GMT", "2024-11-05T10:00:00+00:00"),
        ("5 November 2024", "2024-11-05"),
        ("Nov 5, 2024", "2024-11-05"),
        (0, "1970-01-01T00:00:00+00:00"),
    ],
)
def test_iso_dates(value: object, iso: str) -> None:
    assert iso_dates(["published"])(Item("post", {"published": value})).data == {"published": iso}


def test_iso_dates_with_an_explicit_format_and_a_bad_value() -> None:
    process = iso_dates(["published"], formats=["%d/%m/%Y"])
    assert process(Item("post", {"published": "05/11/2024"})).data["published"] == "2024-11-05"
    with pytest.raises(InvalidItem, match="published: not a date"):
        process(Item("post", {"published": "yesterday"}))


class Product(pydantic.BaseModel):
    name: str
    price: float
    in_stock: bool = True


def test_validate_replaces_data_with_the_model_dump() -> None:
    process = validate({"product": Product})
    out = process(Item("product", {"name": "A", "price": "9.5"}, key="1"))
    assert out.data == {"name": "A", "price": 9.5, "in_stock": True}
    other = Item("review", {"anything": object()})
    assert process(other) is other


def test_validate_names_every_bad_field() -> None:
    with pytest.raises(InvalidItem) as caught:
        validate({"product": Product})(Item("product", {"price": "cheap"}))
    assert isinstance(caught.value, DropItem)
    assert "name: Field required" in str(caught.value)
    assert "price: Input should be a valid number" in str(caught.value)


def test_dedupe_by_key_then_by_content() -> None:
    process = dedupe()
    process(Item("product", {"v": 1}, key="a"))
    with pytest.raises(DropItem, match="duplicate"):
        process(Item("product", {"v": 1}, key="a"))
    process(Item("product", {"v": 2}, key="a"))  # a new version (a revisit) passes
    with pytest.raises(DropItem, match="duplicate"):
        process(Item("product", {"v": 2}, key="a"))
    process(Item("review", {"v": 1}, key="a"))  # another type
    process(Item("quote", {"text": "x"}))
    with pytest.raises(DropItem, match="duplicate"):
        process(Item("quote", {"text": "x"}, url="http://elsewhere/"))


def test_dedupe_is_bounded_and_can_forget() -> None:
    process = dedupe(max_keys=2)
    for key in ("a", "b", "c"):
        process(Item("t", {}, key=key))
    process(Item("t", {}, key="a"))  # forgotten: only the two most recent are kept
    with pytest.raises(DropItem):
        process(Item("t", {}, key="c"))
    process.forget([Item("t", {}, key="c")])
    process(Item("t", {}, key="c"))


def test_content_hash_ignores_volatile_fields_and_key_order() -> None:
    assert content_hash({"a": 1, "b": 2, "fetched_at": 1.0}) == content_hash({"b": 2, "a": 1})
    assert content_hash({"a": 1}) != content_hash({"a": 2})
    assert item_key(Item("t", {"a": 1})) == content_hash({"a": 1})
    assert item_key(Item("t", {"a": 1}, key="k")) == "k"
    assert record(Item("t", {"a": 1, "type": "shadow"}, key="k")) == {
        "type": "t",
        "key": "k",
        "a": 1,
    }
