"""A URL split on the fast path goes where the slow path sends it (``fetchers/target.py``)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from crawlfleet.fetchers.target import _parsed, _plain, target_of

PIECES = st.sampled_from(
    [
        "a",
        "Z",
        "0",
        "-",
        ".",
        "_",
        "~",
        "!",
        "$",
        "&",
        "'",
        "(",
        ")",
        "*",
        "+",
        ",",
        ";",
        "=",
        ":",
        "/",
        "?",
        "%",
        "#",
        "@",
        "[",
        "]",
        " ",
        "é",
        "\\",
        "..",
        "/./",
        "/../",
        "%41",
        "%e9",
    ]
)
HOSTS = st.sampled_from(
    [
        "a.test",
        "shop-1.example",
        "127.0.0.2",
        "A.test",
        "xn--bcher-kva.example",
        "bücher.test",
        "a..b",
        "-a.test",
        "a_b.test",
        "[::1]",
        "user:pw@a.test",
        "a.test.",
        "0x7f.1",
        "1.2.3",
        "2130706433",
        "a.0x10",
        "xn--a.test",
        "",
    ]
)
PORTS = st.sampled_from(["", ":80", ":443", ":8080", ":0443", ":0", ":99999", ":", ":x"])


@settings(max_examples=1000)
@given(
    st.sampled_from(["http", "https", "HTTP", "ftp"]),
    HOSTS,
    PORTS,
    st.lists(PIECES, max_size=12).map("".join),
)
def test_the_fast_path_agrees_with_the_slow_path(
    scheme: str, host: str, port: str, rest: str
) -> None:
    url = f"{scheme}://{host}{port}{rest}"
    fast = _plain(url)
    if fast is None:
        return
    assert fast == _parsed(url)
    assert target_of(url) == fast


def test_plain_urls_take_the_fast_path() -> None:
    for url in ["http://127.0.0.2:18412/p/1.html", "https://shop.example/c?page=2&x=(1)"]:
        assert _plain(url) is not None
