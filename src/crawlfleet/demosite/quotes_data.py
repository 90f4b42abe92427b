"""The quotes site's fixed data: 10 invented authors and 50 invented quotes, 10 per page."""

from __future__ import annotations

from dataclasses import dataclass

PAGE_SIZE = 10
TAGS: tuple[str, ...] = ("life", "work", "time", "hope", "books", "change", "friendship", "truth")
_SUBJECTS = (
    "A patient mind",
    "Every small habit",
    "The unread book",
    "An honest question",
    "A quiet morning",
    "Each missed chance",
    "The longest road",
    "A borrowed idea",
    "Every closed door",
    "The last candle",
)
_PREDICATES = (
    "teaches more than a loud lesson.",
    "is a map drawn in pencil.",
    "outlives the hurry that ignored it.",
    "asks for nothing and gives back a year.",
    "turns strangers into neighbours.",
)
_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_AUTHOR_NAMES = (
    "Mara Quillfeather",
    "Otto Brennwald",
    "Ines Calloway",
    "Tobiah Marsh",
    "Liesel Varga",
    "Anselm Rook",
    "Priya Halden",
    "Corin Ashby",
    "Yusuf Delacroix",
    "Greta Nyholm",
)
_PLACES = ("Lisbon", "Tromsø", "Valparaíso", "Kraków", "Hobart")


@dataclass(frozen=True, slots=True)
class Author:
    name: str
    slug: str
    born_date: str
    born_location: str
    description: str

    @property
    def url_path(self) -> str:
        return f"/author/{self.slug}/"


@dataclass(frozen=True, slots=True)
class Quote:
    """One quote; ``id`` is 1-based and ``text`` excludes the curly quotes the page adds."""

    id: int
    text: str
    author: str
    tags: tuple[str, ...]

    @property
    def page(self) -> int:
        return (self.id - 1) // PAGE_SIZE + 1


def _author(index: int, name: str) -> Author:
    return Author(
        name=name,
        slug="-".join(name.split()),
        born_date=f"{_MONTHS[(index * 5) % 12]} {index * 3 % 28 + 1}, {1850 + index * 11}",
        born_location=f"in {_PLACES[index % len(_PLACES)]}",
        description=f"{name} wrote essays and letters, collected here as invented examples.",
    )


AUTHORS: tuple[Author, ...] = tuple(_author(i, n) for i, n in enumerate(_AUTHOR_NAMES))


def _quote(quote_id: int) -> Quote:
    index = quote_id - 1
    tag_count = index % 3 + 1
    tags = tuple(sorted({TAGS[(index * 3 + k * 5) % len(TAGS)] for k in range(tag_count)}))
    return Quote(
        id=quote_id,
        text=f"{_SUBJECTS[index % 10]} {_PREDICATES[index // 10]}",
        author=AUTHORS[(index * 7) % len(AUTHORS)].name,
        tags=tags,
    )


QUOTES: tuple[Quote, ...] = tuple(_quote(i) for i in range(1, 51))
PAGE_COUNT = len(QUOTES) // PAGE_SIZE


def quotes_on_page(number: int) -> tuple[Quote, ...]:
    """The quotes on page ``number`` (1-based); empty past the last page."""
    if number < 1:
        return ()
    return QUOTES[(number - 1) * PAGE_SIZE : number * PAGE_SIZE]


def author_by_slug(slug: str) -> Author | None:
    return next((a for a in AUTHORS if a.slug == slug), None)


def author_by_name(name: str) -> Author:
    return next(a for a in AUTHORS if a.name == name)
