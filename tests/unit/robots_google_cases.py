"""The expectations of Google's robots.txt parser tests, as a table of our own.

Source: github.com/google/robotstxt, ``robots_test.cc`` (the 145 ``IsUserAgentAllowed``
expectations, plus its byte-order-mark, line-ending, sitemap, path and escaping tests).
Each case is named ``<Google test name>/<n>``, ``n`` counting that test's expectations in
their order there. Facts carried over: the file, the agent, the URL and the answer.

``DIFFERS`` names the cases where we answer otherwise on purpose, with the reason; the
tests and ``bench/robots_matching.py`` both read it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Case:
    """Google's answer for ``agent`` asking for ``url`` under the robots.txt ``body``."""

    name: str
    body: bytes
    agent: str
    url: str
    allowed: bool


CASES: list[Case] = []
_numbered: dict[str, int] = {}


def _add(test: str, body: str | bytes, expectations: list[tuple[str, str, bool]]) -> None:
    """Cases of one Google test, numbered on from that test's earlier files."""
    raw = body.encode() if isinstance(body, str) else body
    start = _numbered.get(test, 0)
    for n, (agent, url, allowed) in enumerate(expectations, start + 1):
        CASES.append(Case(f"{test}/{n}", raw, agent, url, allowed))
    _numbered[test] = start + len(expectations)


FOO = "FooBot"

_add("GoogleOnly_SystemTest", "", [(FOO, "", True)])
_add(
    "GoogleOnly_SystemTest", "user-agent: FooBot\ndisallow: /\n", [("", "", True), (FOO, "", False)]
)
_add("GoogleOnly_SystemTest", "", [("", "", True)])

_URL = "http://foo.bar/x/y"
_add("ID_LineSyntax_Line", "user-agent: FooBot\ndisallow: /\n", [(FOO, _URL, False)])
_add("ID_LineSyntax_Line", "foo: FooBot\nbar: /\n", [(FOO, _URL, True)])
_add("ID_LineSyntax_Line", "user-agent FooBot\ndisallow /\n", [(FOO, _URL, False)])

_GROUPS = (
    "allow: /foo/bar/\n\nuser-agent: FooBot\ndisallow: /\nallow: /x/\nuser-agent: BarBot\n"
    "disallow: /\nallow: /y/\n\n\nallow: /w/\nuser-agent: BazBot\n\nuser-agent: FooBot\n"
    "allow: /z/\ndisallow: /\n"
)
_add(
    "ID_LineSyntax_Groups",
    _GROUPS,
    [
        (FOO, "http://foo.bar/x/b", True),
        (FOO, "http://foo.bar/z/d", True),
        (FOO, "http://foo.bar/y/c", False),
        ("BarBot", "http://foo.bar/y/c", True),
        ("BarBot", "http://foo.bar/w/a", True),
        ("BarBot", "http://foo.bar/z/d", False),
        ("BazBot", "http://foo.bar/z/d", True),
        (FOO, "http://foo.bar/foo/bar/", False),
        ("BarBot", "http://foo.bar/foo/bar/", False),
        ("BazBot", "http://foo.bar/foo/bar/", False),
    ],
)

_add(
    "ID_LineSyntax_Groups_OtherRules",
    "User-agent: BarBot\nSitemap: https://foo.bar/sitemap\nUser-agent: *\nDisallow: /\n",
    [(FOO, "http://foo.bar/", False), ("BarBot", "http://foo.bar/", False)],
)
_add(
    "ID_LineSyntax_Groups_OtherRules",
    "User-agent: FooBot\nInvalid-Unknown-Line: unknown\nUser-agent: *\nDisallow: /\n",
    [(FOO, "http://foo.bar/", False), ("BarBot", "http://foo.bar/", False)],
)

_CASE_FILES = [
    "USER-AGENT: FooBot\nALLOW: /x/\nDISALLOW: /\n",
    "user-agent: FooBot\nallow: /x/\ndisallow: /\n",
    "uSeR-aGeNt: FooBot\nAlLoW: /x/\ndIsAlLoW: /\n",
]
# Google's order: the three files for the allowed URL, then the three for the disallowed one.
for _body in _CASE_FILES:
    _add("ID_REPLineNamesCaseInsensitive", _body, [(FOO, "http://foo.bar/x/y", True)])
for _body in _CASE_FILES:
    _add("ID_REPLineNamesCaseInsensitive", _body, [(FOO, "http://foo.bar/a/b", False)])

_AGENT_FILES = [
    "User-Agent: FOO BAR\nAllow: /x/\nDisallow: /\n",
    "User-Agent: foo bar\nAllow: /x/\nDisallow: /\n",
    "User-Agent: FoO bAr\nAllow: /x/\nDisallow: /\n",
]
for _agent in ("Foo", "foo"):
    for _url, _allowed in (("http://foo.bar/x/y", True), ("http://foo.bar/a/b", False)):
        for _body in _AGENT_FILES:
            _add("ID_UserAgentValueCaseInsensitive", _body, [(_agent, _url, _allowed)])

_add(
    "GoogleOnly_AcceptUserAgentUpToFirstSpace",
    "User-Agent: *\nDisallow: /\nUser-Agent: Foo Bar\nAllow: /x/\nDisallow: /\n",
    [("Foo", "http://foo.bar/x/y", True), ("Foo Bar", "http://foo.bar/x/y", False)],
)

_add("ID_GlobalGroups_Secondary", "", [(FOO, _URL, True)])
_add(
    "ID_GlobalGroups_Secondary",
    "user-agent: *\nallow: /\nuser-agent: FooBot\ndisallow: /\n",
    [(FOO, _URL, False), ("BarBot", _URL, True)],
)
_add(
    "ID_GlobalGroups_Secondary",
    "user-agent: FooBot\nallow: /\nuser-agent: BarBot\ndisallow: /\nuser-agent: BazBot\n"
    "disallow: /\n",
    [("QuxBot", _URL, True)],
)

_add(
    "ID_AllowDisallow_Value_CaseSensitive",
    "user-agent: FooBot\ndisallow: /x/\n",
    [(FOO, _URL, False)],
)
_add(
    "ID_AllowDisallow_Value_CaseSensitive",
    "user-agent: FooBot\ndisallow: /X/\n",
    [(FOO, _URL, True)],
)

_PAGE = "http://foo.bar/x/page.html"
_LONGEST = "ID_LongestMatch"
_add(_LONGEST, "user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/\n", [(FOO, _PAGE, False)])
_add(
    _LONGEST,
    "user-agent: FooBot\nallow: /x/page.html\ndisallow: /x/\n",
    [(FOO, _PAGE, True), (FOO, "http://foo.bar/x/", False)],
)
_add(_LONGEST, "user-agent: FooBot\ndisallow: \nallow: \n", [(FOO, _PAGE, True)])
_add(_LONGEST, "user-agent: FooBot\ndisallow: /\nallow: /\n", [(FOO, _PAGE, True)])
_add(
    _LONGEST,
    "user-agent: FooBot\ndisallow: /x\nallow: /x/\n",
    [(FOO, "http://foo.bar/x", False), (FOO, "http://foo.bar/x/", True)],
)
_add(
    _LONGEST,
    "user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/page.html\n",
    [(FOO, _PAGE, True)],
)
_add(
    _LONGEST,
    "user-agent: FooBot\nallow: /page\ndisallow: /*.html\n",
    [(FOO, "http://foo.bar/page.html", False), (FOO, "http://foo.bar/page", True)],
)
_add(
    _LONGEST,
    "user-agent: FooBot\nallow: /x/page.\ndisallow: /*.html\n",
    [(FOO, _PAGE, True), (FOO, "http://foo.bar/x/y.html", False)],
)
_add(
    _LONGEST,
    "User-agent: *\nDisallow: /x/\nUser-agent: FooBot\nDisallow: /y/\n",
    [(FOO, "http://foo.bar/x/page", True), (FOO, "http://foo.bar/y/page", False)],
)

_ENC = "ID_Encoding"
_add(
    _ENC,
    "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar?qux=taz&baz=http://foo.bar?tar&par\n",
    [(FOO, "http://foo.bar/foo/bar?qux=taz&baz=http://foo.bar?tar&par", True)],
)
_add(
    _ENC,
    "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/\u30c4\n",
    [
        (FOO, "http://foo.bar/foo/bar/%E3%83%84", True),
        (FOO, "http://foo.bar/foo/bar/\u30c4", False),
    ],
)
_add(
    _ENC,
    "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%E3%83%84\n",
    [
        (FOO, "http://foo.bar/foo/bar/%E3%83%84", True),
        (FOO, "http://foo.bar/foo/bar/\u30c4", False),
    ],
)
_add(
    _ENC,
    "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%62%61%7A\n",
    [(FOO, "http://foo.bar/foo/bar/baz", False), (FOO, "http://foo.bar/foo/bar/%62%61%7A", True)],
)

_SPECIAL = "ID_SpecialCharacters"
_add(
    _SPECIAL,
    "User-agent: FooBot\nDisallow: /foo/bar/quz\nAllow: /foo/*/qux\n",
    [
        (FOO, "http://foo.bar/foo/bar/quz", False),
        (FOO, "http://foo.bar/foo/quz", True),
        (FOO, "http://foo.bar/foo//quz", True),
        (FOO, "http://foo.bar/foo/bax/quz", True),
    ],
)
_add(
    _SPECIAL,
    "User-agent: FooBot\nDisallow: /foo/bar$\nAllow: /foo/bar/qux\n",
    [
        (FOO, "http://foo.bar/foo/bar", False),
        (FOO, "http://foo.bar/foo/bar/qux", True),
        (FOO, "http://foo.bar/foo/bar/", True),
        (FOO, "http://foo.bar/foo/bar/baz", True),
    ],
)
_add(
    _SPECIAL,
    "User-agent: FooBot\n# Disallow: /\nDisallow: /foo/quz#qux\nAllow: /\n",
    [(FOO, "http://foo.bar/foo/bar", True), (FOO, "http://foo.bar/foo/quz", False)],
)

_add(
    "GoogleOnly_IndexHTMLisDirectory",
    "User-Agent: *\nAllow: /allowed-slash/index.html\nDisallow: /\n",
    [
        ("foobot", "http://foo.com/allowed-slash/", True),
        ("foobot", "http://foo.com/allowed-slash/index.htm", False),
        ("foobot", "http://foo.com/allowed-slash/index.html", True),
        ("foobot", "http://foo.com/anyother-url", False),
    ],
)

# Google cuts a line after 8 x 2083 - 1 bytes: a pattern longer than that is read cut.
_LINE_BYTES = 8 * 2083
_long = "/x/" + "a" * (_LINE_BYTES - len("/x/") - len("disallow: ") + 1 - len("/x/"))
_add(
    "GoogleOnly_LineTooLong",
    f"user-agent: FooBot\ndisallow: {_long}/qux\n",
    [(FOO, "http://foo.bar/fux", True), (FOO, f"http://foo.bar{_long}/fux", False)],
)
_long_a = "/x/" + "a" * (_LINE_BYTES - len("/x/") - len("allow: ") + 1 - len("/x/"))
_long_b = "/x/" + "b" * (len(_long_a) - len("/x/"))
_add(
    "GoogleOnly_LineTooLong",
    f"user-agent: FooBot\ndisallow: /\nallow: {_long_a}/qux\nallow: {_long_b}/qux\n",
    [
        (FOO, "http://foo.bar/", False),
        (FOO, f"http://foo.bar{_long_a}/qux", True),
        (FOO, f"http://foo.bar{_long_b}/fux", True),
    ],
)

_DOC = "GoogleOnly_DocumentationChecks"
_B = "http://foo.bar"
_add(
    _DOC,
    "user-agent: FooBot\ndisallow: /\nallow: /fish\n",
    [
        (FOO, f"{_B}/bar", False),
        (FOO, f"{_B}/fish", True),
        (FOO, f"{_B}/fish.html", True),
        (FOO, f"{_B}/fish/salmon.html", True),
        (FOO, f"{_B}/fishheads", True),
        (FOO, f"{_B}/fishheads/yummy.html", True),
        (FOO, f"{_B}/fish.html?id=anything", True),
        (FOO, f"{_B}/Fish.asp", False),
        (FOO, f"{_B}/catfish", False),
        (FOO, f"{_B}/?id=fish", False),
    ],
)
_add(
    _DOC,
    "user-agent: FooBot\ndisallow: /\nallow: /fish*\n",
    [
        (FOO, f"{_B}/bar", False),
        (FOO, f"{_B}/fish", True),
        (FOO, f"{_B}/fish.html", True),
        (FOO, f"{_B}/fish/salmon.html", True),
        (FOO, f"{_B}/fishheads", True),
        (FOO, f"{_B}/fishheads/yummy.html", True),
        (FOO, f"{_B}/fish.html?id=anything", True),
        (FOO, f"{_B}/Fish.bar", False),
        (FOO, f"{_B}/catfish", False),
        (FOO, f"{_B}/?id=fish", False),
    ],
)
_add(
    _DOC,
    "user-agent: FooBot\ndisallow: /\nallow: /fish/\n",
    [
        (FOO, f"{_B}/bar", False),
        (FOO, f"{_B}/fish/", True),
        (FOO, f"{_B}/fish/salmon", True),
        (FOO, f"{_B}/fish/?salmon", True),
        (FOO, f"{_B}/fish/salmon.html", True),
        (FOO, f"{_B}/fish/?id=anything", True),
        (FOO, f"{_B}/fish", False),
        (FOO, f"{_B}/fish.html", False),
        (FOO, f"{_B}/Fish/Salmon.html", False),
    ],
)
_add(
    _DOC,
    "user-agent: FooBot\ndisallow: /\nallow: /*.php\n",
    [
        (FOO, f"{_B}/bar", False),
        (FOO, f"{_B}/filename.php", True),
        (FOO, f"{_B}/folder/filename.php", True),
        (FOO, f"{_B}/folder/filename.php?parameters", True),
        (FOO, f"{_B}//folder/any.php.file.html", True),
        (FOO, f"{_B}/filename.php/", True),
        (FOO, f"{_B}/index?f=filename.php/", True),
        (FOO, f"{_B}/php/", False),
        (FOO, f"{_B}/index?php", False),
        (FOO, f"{_B}/windows.PHP", False),
    ],
)
_add(
    _DOC,
    "user-agent: FooBot\ndisallow: /\nallow: /*.php$\n",
    [
        (FOO, f"{_B}/bar", False),
        (FOO, f"{_B}/filename.php", True),
        (FOO, f"{_B}/folder/filename.php", True),
        (FOO, f"{_B}/filename.php?parameters", False),
        (FOO, f"{_B}/filename.php/", False),
        (FOO, f"{_B}/filename.php5", False),
        (FOO, f"{_B}/php/", False),
        (FOO, f"{_B}/filename?php", False),
        (FOO, f"{_B}/aaaphpaaa", False),
        (FOO, f"{_B}//windows.PHP", False),
    ],
)
_add(
    _DOC,
    "user-agent: FooBot\ndisallow: /\nallow: /fish*.php\n",
    [
        (FOO, f"{_B}/bar", False),
        (FOO, f"{_B}/fish.php", True),
        (FOO, f"{_B}/fishheads/catfish.php?parameters", True),
        (FOO, f"{_B}/Fish.PHP", False),
    ],
)
_add(_DOC, "user-agent: FooBot\nallow: /p\ndisallow: /\n", [(FOO, "http://example.com/page", True)])
_add(
    _DOC,
    "user-agent: FooBot\nallow: /folder\ndisallow: /folder\n",
    [(FOO, "http://example.com/folder/page", True)],
)
_add(
    _DOC,
    "user-agent: FooBot\nallow: /page\ndisallow: /*.htm\n",
    [(FOO, "http://example.com/page.htm", False)],
)
_add(
    _DOC,
    "user-agent: FooBot\nallow: /$\ndisallow: /\n",
    [(FOO, "http://example.com/", True), (FOO, "http://example.com/page.html", False)],
)

# ID_UTF8ByteOrderMarkIsSkipped and ID_LinesNumbersAreCountedCorrectly count the directives
# Google's parser reports; here the same files carry a Disallow and the count shows as
# which rules apply.
_RULES = b"User-Agent: foo\nDisallow: /AnyValue\n"
_BOM_FILES = [
    (b"\xef\xbb\xbf" + _RULES, False),  # a whole BOM: both lines read
    (b"\xef\xbb" + _RULES, False),  # two bytes of it: skipped too
    (b"\xef" + _RULES, False),  # one byte of it: skipped too
    (b"\xef\x11\xbf" + _RULES, True),  # not a BOM: the first line is garbage, no group
    (b"User-Agent: foo\n\xef\xbb\xbfDisallow: /AnyValue\n", True),  # a BOM mid-file: garbage
]
for _body_bytes, _allowed in _BOM_FILES:
    _add(
        "ID_UTF8ByteOrderMarkIsSkipped", _body_bytes, [("foo", "http://foo.bar/AnyValue", _allowed)]
    )

for _eol in (b"\n", b"\r\n", b"\r", b"mixed", b"no-final-newline"):
    _lines = [
        b"User-Agent: foo",
        b"Allow: /some/path",
        b"User-Agent: bar",
        b"",
        b"",
        b"Disallow: /",
    ]
    if _eol == b"mixed":
        _text = b"User-Agent: foo\nAllow: /some/path\r\nUser-Agent: bar\n\r\n\nDisallow: /"
    elif _eol == b"no-final-newline":
        _text = b"\n".join(_lines)
    else:
        _text = _eol.join(_lines) + _eol
    _add(
        "ID_LinesNumbersAreCountedCorrectly",
        _text,
        [("foo", "http://foo.bar/x", True), ("bar", "http://foo.bar/x", False)],
    )

SITEMAP_FILES: list[tuple[str, bytes, list[str]]] = [
    (
        "ID_NonStandardLineExample_Sitemap/1",
        b"User-Agent: foo\nAllow: /some/path\nUser-Agent: bar\n\n\n"
        b"Sitemap: http://foo.bar/sitemap.xml\n",
        ["http://foo.bar/sitemap.xml"],
    ),
    (
        "ID_NonStandardLineExample_Sitemap/2",
        b"Sitemap: http://foo.bar/sitemap.xml\nUser-Agent: foo\nAllow: /some/path\n"
        b"User-Agent: bar\n\n\n",
        ["http://foo.bar/sitemap.xml"],
    ),
]

# TestGetPathParamsQuery, the cases of absolute URLs (ours are always absolute; Google's
# function also reads host-less strings such as "a/b").
TARGETS: list[tuple[str, str, str]] = [
    ("TestGetPathParamsQuery/1", "", "/"),
    ("TestGetPathParamsQuery/2", "http://www.example.com", "/"),
    ("TestGetPathParamsQuery/3", "http://www.example.com/", "/"),
    ("TestGetPathParamsQuery/4", "http://www.example.com/a", "/a"),
    ("TestGetPathParamsQuery/5", "http://www.example.com/a/", "/a/"),
    ("TestGetPathParamsQuery/6", "http://www.example.com/a/b?c=http://d.e/", "/a/b?c=http://d.e/"),
    ("TestGetPathParamsQuery/7", "http://www.example.com/a/b?c=d&e=f#fragment", "/a/b?c=d&e=f"),
]

ESCAPES: list[tuple[str, str, str]] = [
    ("TestMaybeEscapePattern/1", "http://www.example.com", "http://www.example.com"),
    ("TestMaybeEscapePattern/2", "/a/b/c", "/a/b/c"),
    ("TestMaybeEscapePattern/3", "\u00e1", "%C3%A1"),
    ("TestMaybeEscapePattern/4", "%aa", "%AA"),
]

# ID_VerifyValidUserAgentsToObey: which names may be a robots_token.
TOKENS: list[tuple[str, str, bool]] = [
    ("ID_VerifyValidUserAgentsToObey/1", "Foobot", True),
    ("ID_VerifyValidUserAgentsToObey/2", "Foobot-Bar", True),
    ("ID_VerifyValidUserAgentsToObey/3", "Foo_Bar", True),
    ("ID_VerifyValidUserAgentsToObey/4", "", False),
    ("ID_VerifyValidUserAgentsToObey/5", "", False),
    ("ID_VerifyValidUserAgentsToObey/6", "\u30c4", False),
    ("ID_VerifyValidUserAgentsToObey/7", "Foobot*", False),
    ("ID_VerifyValidUserAgentsToObey/8", " Foobot ", False),
    ("ID_VerifyValidUserAgentsToObey/9", "Foobot/2.1", False),
    ("ID_VerifyValidUserAgentsToObey/10", "Foobot Bar", False),
    ("GoogleOnly_AcceptUserAgentUpToFirstSpace/valid-token", "Foobot Bar", False),
]

DIFFERS: dict[str, str] = {
    "ID_Encoding/3": (
        "the URL is matched as it will be requested: a raw '\u30c4' in a path goes on the wire "
        "as %E3%83%84, which the rule allows (Google leaves escaping the URL to its caller)"
    ),
    "ID_Encoding/5": (
        "the URL is matched as it will be requested: a raw '\u30c4' in a path goes on the wire "
        "as %E3%83%84, which the rule allows (Google leaves escaping the URL to its caller)"
    ),
}
"""Google's cases we answer otherwise on purpose, and why."""
