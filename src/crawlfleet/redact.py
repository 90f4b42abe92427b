"""The one credential scrubber: every URL, DSN or message shown to a person passes through it.

``redact(text)`` replaces with ``***``:

- the password of a URL's userinfo (``redis://user:pw@host``, ``http://u:pw@host/``);
- the value of a secret query parameter (``?password=``, ``pass``, ``token``, ``api_key`` ...);
- the value of ``password=`` in a libpq keyword DSN (``host=db password='it''s'``).

``redact(text, source)`` also removes every credential *value* found in ``source`` (a DSN or
URL) wherever it appears in ``text``: a driver's error message may quote the password in any
form. libpq DSNs are read with psycopg's own parser (``psycopg.conninfo.conninfo_to_dict``)
when psycopg is installed, else with a parser of the same quoting rules.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, unquote, urlsplit

MASK = "***"
SECRET_PARAMS = frozenset(
    {
        "password",
        "passwd",
        "pass",
        "pwd",
        "secret",
        "token",
        "access_token",
        "auth_token",
        "api_key",
        "apikey",
        "sslpassword",
    }
)
# A value shorter than this is masked only where its key says it is a secret: masking it
# everywhere in a message would garble the message and reveal the value by its gaps.
MIN_SWEPT_CHARS = 4

_NAMES = "|".join(sorted(SECRET_PARAMS, key=len, reverse=True))
_URL_AUTHORITY = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<netloc>[^/?#\s]*)")
_QUERY_SECRET = re.compile(rf"(?i)([?&;](?:{_NAMES})=)[^&#\s]*")
_KEYWORD_SECRET = re.compile(rf"(?i)(?<![\w?&;])((?:{_NAMES})\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s'&]+)")


def redact(text: str, source: str | None = None) -> str:
    """``text`` with every credential replaced by ``***`` (see the module docstring).

    ``source``: the DSN or URL ``text`` is about; its credential values are masked wherever
    they appear in ``text``.
    """
    swept = sorted(
        (s for s in credential_values(source) if len(s) >= MIN_SWEPT_CHARS),
        key=len,
        reverse=True,
    )
    for value in swept:
        text = text.replace(value, MASK)
    text = _URL_AUTHORITY.sub(_mask_userinfo, text)
    text = _QUERY_SECRET.sub(rf"\1{MASK}", text)
    return _KEYWORD_SECRET.sub(rf"\1{MASK}", text)


def credential_values(source: str | None) -> set[str]:
    """The secret values in a DSN or URL: password, secret query parameters, as written and
    percent-decoded."""
    if not source:
        return set()
    values: set[str] = set()
    if "://" in source:
        values |= _url_values(source)
    values |= {value for key, value in conninfo_pairs(source).items() if key in SECRET_PARAMS}
    values.discard("")
    return values | {unquote(value) for value in values}


def conninfo_pairs(dsn: str) -> dict[str, str]:
    """The keyword/value pairs of a libpq DSN (keyword or URI form); ``{}`` if it is none."""
    try:
        from psycopg import Error, conninfo  # the driver's own parser, when installed
    except ImportError:
        return _keyword_pairs(dsn) if "://" not in dsn else {}
    try:
        return {key: str(value) for key, value in conninfo.conninfo_to_dict(dsn).items()}
    except Error:  # not a libpq DSN
        return _keyword_pairs(dsn) if "://" not in dsn else {}


def _url_values(url: str) -> set[str]:
    values: set[str] = set()
    for match in _URL_AUTHORITY.finditer(url):
        userinfo, at, _ = match["netloc"].rpartition("@")
        if at and ":" in userinfo:
            values.add(userinfo.partition(":")[2])
    try:
        query = urlsplit(url).query
    except ValueError:
        query = url.partition("?")[2]
    values |= {v for k, v in parse_qsl(query, keep_blank_values=True) if k.lower() in SECRET_PARAMS}
    return values


def _mask_userinfo(match: re.Match[str]) -> str:
    userinfo, at, host = match["netloc"].rpartition("@")
    if not at or ":" not in userinfo:
        return match[0]
    user = userinfo.partition(":")[0]
    return f"{match['scheme']}{user}:{MASK}@{host}"


_PAIR = re.compile(r"\s*([A-Za-z_][\w]*)\s*=\s*('(?:[^'\\]|\\.)*'|(?:[^\s'\\]|\\.)*)")


def _keyword_pairs(dsn: str) -> dict[str, str]:
    """libpq keyword/value pairs: values bare or in single quotes, ``\\`` escapes either."""
    pairs: dict[str, str] = {}
    pos = 0
    while pos < len(dsn.rstrip()):
        match = _PAIR.match(dsn, pos)
        if match is None:
            return pairs
        raw = match[2]
        if raw.startswith("'"):
            raw = raw[1:-1]
        pairs[match[1].lower()] = re.sub(r"\\(.)", r"\1", raw)
        pos = match.end()
    return pairs
