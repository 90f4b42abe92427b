"""Turning a scraped price text ("£51.77", "1.234,50 €", "US$10") into an amount and a currency.

Separators: when both ``.`` and ``,`` occur, the last one is the decimal mark. When only one
kind occurs, it is a thousands separator if it occurs more than once, or once followed by
exactly three digits after a non-zero integer part ("1,234" and "1.234" are 1234, "0.125" is
0.125); otherwise it is the decimal mark. Spaces and apostrophes group thousands.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

# Longest symbols first, so "US$" wins over "$".
CURRENCY_SYMBOLS: tuple[tuple[str, str], ...] = (
    ("US$", "USD"),
    ("CA$", "CAD"),
    ("C$", "CAD"),
    ("AU$", "AUD"),
    ("A$", "AUD"),
    ("NZ$", "NZD"),
    ("HK$", "HKD"),
    ("S$", "SGD"),
    ("R$", "BRL"),
    ("zł", "PLN"),
    ("Kč", "CZK"),
    ("£", "GBP"),
    ("€", "EUR"),
    ("$", "USD"),
    ("¥", "JPY"),
    ("₹", "INR"),
    ("₽", "RUB"),
    ("₩", "KRW"),
    ("₺", "TRY"),
    ("₪", "ILS"),
    ("₫", "VND"),
    ("฿", "THB"),
    ("₴", "UAH"),
)

_NUMBER = re.compile(r"-?\d[\d.,' \u00a0\u2009\u202f]*")
_CODE_BEFORE = re.compile(r"(?<![A-Za-z])([A-Z]{3})\s*$")
_CODE_AFTER = re.compile(r"^\s*([A-Z]{3})(?![A-Za-z])")
_GROUPING = str.maketrans("", "", "' \u00a0\u2009\u202f")


@dataclass(frozen=True, slots=True)
class Price:
    """An amount as a plain decimal string ("1234.50") and an ISO 4217 code, or None if unknown."""

    amount: str
    currency: str | None

    def to_dict(self) -> dict[str, str | None]:
        return {"amount": self.amount, "currency": self.currency}


def parse_price(text: str, *, default_currency: str | None = None) -> Price | None:
    """The price in ``text``, or None when it holds no number."""
    match = _NUMBER.search(text)
    if match is None:
        return None
    amount = _parse_amount(match.group().strip())
    if amount is None:
        return None
    before, after = text[: match.start()], text[match.end() :]
    return Price(format(amount, "f"), _currency(before, after) or default_currency)


def _parse_amount(raw: str) -> Decimal | None:
    negative = raw.startswith("-")
    digits = raw.lstrip("-").translate(_GROUPING).rstrip(".,")
    last_dot, last_comma = digits.rfind("."), digits.rfind(",")
    if last_dot >= 0 and last_comma >= 0:
        decimal_mark = "." if last_dot > last_comma else ","
        grouping = "," if decimal_mark == "." else "."
        digits = digits.replace(grouping, "").replace(decimal_mark, ".")
    elif last_dot >= 0 or last_comma >= 0:
        mark = "." if last_dot >= 0 else ","
        whole, _, fraction = digits.rpartition(mark)
        is_grouping = digits.count(mark) > 1 or (
            len(fraction) == 3 and whole.strip("0") != "" and whole.isdigit()
        )
        digits = digits.replace(mark, "") if is_grouping else digits.replace(mark, ".")
    try:
        amount = Decimal(digits)
    except InvalidOperation:
        return None
    return -amount if negative else amount


def _currency(before: str, after: str) -> str | None:
    """A currency symbol anywhere around the number, else an ISO code right next to it."""
    for symbol, code in CURRENCY_SYMBOLS:
        if symbol in before or symbol in after:
            return code
    match = _CODE_BEFORE.search(before) or _CODE_AFTER.search(after)
    return match.group(1) if match else None
