"""The request headers every HTTP fetch sends: one consistent profile."""

from __future__ import annotations

ACCEPT_HTML = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


def default_headers(user_agent: str, *, accept_language: str = "en-US,en;q=0.8") -> dict[str, str]:
    """User-Agent, Accept, Accept-Language and Accept-Encoding for an HTML crawl.

    Accept-Encoding lists exactly the codings ``decoding.decode_body`` undoes.
    """
    return {
        "User-Agent": user_agent,
        "Accept": ACCEPT_HTML,
        "Accept-Language": accept_language,
        "Accept-Encoding": "gzip, deflate, br",
    }
