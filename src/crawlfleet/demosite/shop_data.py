"""The shop's fixed catalogue: 50 products in 5 categories, generated without randomness."""

from __future__ import annotations

from dataclasses import dataclass

PAGE_SIZE = 10
CATEGORIES: tuple[str, ...] = ("Travel", "Mystery", "Poetry", "Science", "History")
_ADJECTIVES = (
    "Silent",
    "Crimson",
    "Hidden",
    "Endless",
    "Paper",
    "Northern",
    "Quiet",
    "Golden",
    "Broken",
    "Distant",
)
_NOUNS = ("River", "Garden", "Lantern", "Harbour", "Orchard")
RATINGS: tuple[str, ...] = ("One", "Two", "Three", "Four", "Five")


@dataclass(frozen=True, slots=True)
class Product:
    """One product; ``stock`` 0 means out of stock, ``rating`` is 1 to 5 stars."""

    id: int
    name: str
    slug: str
    price_pence: int
    category: str
    stock: int
    rating: int
    upc: str

    @property
    def price_gbp(self) -> float:
        return self.price_pence / 100

    @property
    def price_text(self) -> str:
        """The price as the page shows it, e.g. ``£51.77``."""
        return f"£{self.price_pence // 100}.{self.price_pence % 100:02d}"

    @property
    def url_path(self) -> str:
        return f"/catalogue/{self.slug}_{self.id}/index.html"

    @property
    def availability(self) -> str:
        return f"In stock ({self.stock} available)" if self.stock else "Out of stock"


def slugify(text: str) -> str:
    return "-".join(text.lower().split())


def category_path(category: str) -> str:
    return f"/catalogue/category/{slugify(category)}/index.html"


def _product(product_id: int) -> Product:
    index = product_id - 1
    name = f"The {_ADJECTIVES[index % 10]} {_NOUNS[index // 10]}"
    return Product(
        id=product_id,
        name=name,
        slug=slugify(name),
        price_pence=1000 + (product_id * 7919) % 5000,
        category=CATEGORIES[index % len(CATEGORIES)],
        stock=0 if product_id % 7 == 0 else (product_id * 13) % 20 + 1,
        rating=product_id % 5 + 1,
        upc=f"{(product_id * 2654435761) % 16**16:016x}",
    )


PRODUCTS: tuple[Product, ...] = tuple(_product(i) for i in range(1, 51))
PAGE_COUNT = len(PRODUCTS) // PAGE_SIZE


def products_on_page(number: int) -> tuple[Product, ...]:
    """The products listed on catalogue page ``number`` (1-based); empty past the last page."""
    if number < 1:
        return ()
    return PRODUCTS[(number - 1) * PAGE_SIZE : number * PAGE_SIZE]


def products_in(category: str) -> tuple[Product, ...]:
    return tuple(p for p in PRODUCTS if p.category == category)
