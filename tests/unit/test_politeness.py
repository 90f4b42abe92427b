"""Backoff, Retry-After, status classes and the block judge: pure logic."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from email.utils import format_datetime

import pytest

from crawlfleet.frontier.backoff import backoff_s
from crawlfleet.frontier.store_types import Signal
from crawlfleet.models import FetchResult
from crawlfleet.runtime.step.judge import (
    DAY_S,
    MAX_CHALLENGE_BYTES,
    StatusClass,
    classify,
    judge,
    parse_retry_after,
    told_domain,
)


def result(status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> FetchResult:
    return FetchResult(
        url="http://example.com/",
        final_url="http://example.com/",
        status=status,
        headers={"content-type": "text/html; charset=utf-8", **(headers or {})},
        body=body,
        elapsed_s=0.01,
    )


JSON = {"content-type": "application/json"}


# backoff_s


def test_backoff_stays_within_the_exponential_ceiling() -> None:
    rng = random.Random(7)
    for attempt in range(12):
        ceiling = min(300.0, 1.0 * 2**attempt)
        samples = [backoff_s(attempt, base_s=1.0, max_s=300.0, rng=rng) for _ in range(200)]
        assert all(0.0 <= s <= ceiling for s in samples)
        # Full jitter: the samples spread over the whole range, not just near the ceiling.
        assert min(samples) < ceiling * 0.1
        assert max(samples) > ceiling * 0.9


def test_backoff_is_deterministic_for_a_seed() -> None:
    first = [backoff_s(a, base_s=0.5, max_s=60, rng=random.Random(1)) for a in range(5)]
    again = [backoff_s(a, base_s=0.5, max_s=60, rng=random.Random(1)) for a in range(5)]
    assert first == again


def test_backoff_survives_huge_attempts_and_rejects_negative() -> None:
    rng = random.Random(0)
    assert 0.0 <= backoff_s(10_000, base_s=1.0, max_s=30.0, rng=rng) <= 30.0
    assert backoff_s(3, base_s=0.0, max_s=30.0, rng=rng) == 0.0
    with pytest.raises(ValueError, match="attempt"):
        backoff_s(-1, base_s=1.0, max_s=30.0, rng=rng)


# parse_retry_after

NOW = 1_700_000_000.0


def http_date(epoch: float) -> str:
    return format_datetime(datetime.fromtimestamp(epoch, UTC), usegmt=True)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("120", 120.0),
        (" 5 ", 5.0),
        ("1.5", 1.5),
        ("0", 0.0),
        ("999999999", DAY_S),
        (None, None),
        ("", None),
        ("soon", None),
        ("-5", 0.0),
        ("nan", None),
        ("inf", None),
        ("1e3", None),
        ("Wed, 99 Foo 2015 07:28:00 GMT", None),
    ],
)
def test_retry_after_values(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value, NOW) == expected


def test_retry_after_http_dates() -> None:
    assert parse_retry_after(http_date(NOW + 90), NOW) == pytest.approx(90.0)
    assert parse_retry_after(http_date(NOW - 90), NOW) == 0.0
    assert parse_retry_after(http_date(NOW + 10 * DAY_S), NOW) == DAY_S
    assert parse_retry_after(http_date(NOW + 10 * DAY_S), NOW, max_s=60.0) == 60.0


# classify


@pytest.mark.parametrize(
    ("status", "headers", "expected"),
    [
        (200, {}, StatusClass.OK),
        (204, {}, StatusClass.OK),
        (304, {}, StatusClass.OK),
        (301, {"location": "/new"}, StatusClass.REDIRECT),
        (404, {}, StatusClass.FINAL),
        (410, {}, StatusClass.FINAL),
        (403, {}, StatusClass.FINAL),
        (400, {}, StatusClass.FINAL),
        (408, {}, StatusClass.TRANSIENT),
        (425, {}, StatusClass.TRANSIENT),
        (429, {}, StatusClass.TRANSIENT),
        (500, {}, StatusClass.TRANSIENT),
        (502, {}, StatusClass.TRANSIENT),
        (503, {}, StatusClass.TRANSIENT),
        (504, {}, StatusClass.TRANSIENT),
        (520, {}, StatusClass.TRANSIENT),
        (999, {}, StatusClass.TRANSIENT),
        (429, {"retry-after": "30"}, StatusClass.RETRY_AFTER),
        (503, {"retry-after": http_date(NOW + 60)}, StatusClass.RETRY_AFTER),
        (429, {"retry-after": "whenever"}, StatusClass.TRANSIENT),
        (500, {"retry-after": "30"}, StatusClass.TRANSIENT),
    ],
)
def test_classify(status: int, headers: dict[str, str], expected: StatusClass) -> None:
    assert classify(result(status, headers=headers)) is expected


# judge: real-looking pages

NAV = "".join(f'<li><a href="/category/{n}">Category {n}</a></li>' for n in range(12))
PRODUCT_PAGE = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Trail Runner 2 | Example Shop</title>
<script src="https://www.google.com/recaptcha/api.js" async defer></script></head>
<body><nav><ul>{NAV}</ul></nav>
<main><h1>Trail Runner 2</h1><p class="price">$89.00</p>
<p>Lightweight trail shoe. Access denied to the warehouse? Pick it up in store.</p>
<section id="reviews"><h2>Write a review</h2>
<form action="/reviews" method="post"><textarea name="text"></textarea>
<div class="g-recaptcha" data-sitekey="6LcX"></div>
<p>Please solve the captcha before posting.</p><button>Post</button></form></section>
</main><footer><a href="/about">About</a> <a href="/contact">Contact</a></footer></body></html>
""".encode()

CLOUDFLARE_CHALLENGE = b"""<!DOCTYPE html><html lang="en-US"><head><title>Just a moment...</title>
<meta http-equiv="refresh" content="390"></head><body><div class="main-wrapper" role="main">
<div class="main-content"><h1 class="zone-name-title h1">shop.example.com</h1>
<h2 class="h2" id="challenge-running">Checking if the site connection is secure</h2>
<noscript><div id="challenge-error-title">Enable JavaScript and cookies to continue</div>
</noscript></div></div><script>(function(){window._cf_chl_opt={cvId: '2',cType: 'managed'};
var cpo = document.createElement('script');
cpo.src = '/cdn-cgi/challenge-platform/h/b/orchestrate/managed/v1?ray=8a1';
document.getElementsByTagName('head')[0].appendChild(cpo);}());</script></body></html>"""

AKAMAI_DENIED = b"""<HTML><HEAD>
<TITLE>Access Denied</TITLE>
</HEAD><BODY>
<H1>Access Denied</H1>
You don't have permission to access "http&#58;&#47;&#47;shop&#46;example&#46;com&#47;" on this
server.<P>Reference&#32;&#35;18&#46;2f3c1002&#46;1700000000&#46;1a2b3c</BODY></HTML>"""

DATADOME_CAPTCHA = b"""<html><head><title>shop.example.com</title>
<style>#cmsg{animation: A 1.5s;}</style></head><body style="margin:0">
<p id="cmsg">Please enable JS and disable any ad blocker</p>
<script data-cfasync="false">var dd={'rt':'c','cid':'AHrlqAAAAAMA','hsh':'2211F52'}</script>
<script data-cfasync="false" src="https://ct.captcha-delivery.com/c.js"></script>
<iframe src="https://geo.captcha-delivery.com/captcha/?initialCid=AHrl" title="DataDome CAPTCHA"
 width="100%" height="100%" style="height:100vh;" frameborder="0"></iframe></body></html>"""


@pytest.mark.parametrize(
    ("status", "body", "headers", "signal", "reason"),
    [
        (200, PRODUCT_PAGE, {}, Signal.SUCCESS, ""),
        (200, b'{"captcha": true, "access denied": 1}', JSON, Signal.SUCCESS, ""),
        (204, b"", {}, Signal.SUCCESS, ""),
        (
            200,
            CLOUDFLARE_CHALLENGE,
            {},
            Signal.BLOCK,
            "challenge page (HTTP 200, '_cf_chl_opt' script)",
        ),
        (
            503,
            CLOUDFLARE_CHALLENGE,
            {},
            Signal.BLOCK,
            "challenge page (HTTP 503, 'challenge-platform')",
        ),
        (
            200,
            CLOUDFLARE_CHALLENGE.replace(b"_cf_chl_opt", b"cfg"),
            {},
            Signal.BLOCK,
            "challenge page (HTTP 200, 'challenge-platform' script)",
        ),
        (403, AKAMAI_DENIED, {}, Signal.BLOCK, "challenge page (HTTP 403, 'access denied')"),
        (
            200,
            AKAMAI_DENIED,
            {},
            Signal.BLOCK,
            "challenge page (HTTP 200, title says 'access denied')",
        ),
        (
            200,
            DATADOME_CAPTCHA,
            {},
            Signal.BLOCK,
            "challenge page (HTTP 200, 'captcha-delivery' CAPTCHA)",
        ),
        # decision 0044: a plain refusal is this URL's (it was a block before)
        (403, b"", {}, Signal.REFUSED, "HTTP 403"),
        (401, b"<html><title>Sign in</title></html>", {}, Signal.REFUSED, "HTTP 401"),
        (451, b"", {}, Signal.REFUSED, "HTTP 451"),
        (429, b"slow down", {"content-type": "text/plain"}, Signal.BLOCK, "HTTP 429"),
        (503, b"<html><title>Down for maintenance</title></html>", {}, Signal.NONE, ""),
        (404, b"<html><title>Not found</title>captcha</html>", {}, Signal.NONE, ""),
        (500, AKAMAI_DENIED, {}, Signal.NONE, ""),
        (301, b"", {"location": "/x"}, Signal.NONE, ""),
    ],
)
def test_judge(
    status: int, body: bytes, headers: dict[str, str], signal: Signal, reason: str
) -> None:
    got_signal, got_reason = judge(result(status, body, headers))
    assert got_signal is signal
    assert got_reason.startswith(reason)
    assert bool(got_reason) == (signal in (Signal.BLOCK, Signal.REFUSED))


@pytest.mark.parametrize("status", [401, 403, 451])
def test_a_refusal_of_a_url_that_succeeded_before_tells_its_domain_a_block(status: int) -> None:
    signal, reason = judge(result(status))
    told = told_domain(signal, reason, succeeded_before=True)
    assert told == (Signal.BLOCK, f"HTTP {status} to a URL that succeeded before")
    assert told_domain(signal, reason, succeeded_before=False) == (Signal.REFUSED, reason)


def test_what_succeeded_before_changes_no_other_judgement() -> None:
    for status, signal in ((200, Signal.SUCCESS), (404, Signal.NONE), (429, Signal.BLOCK)):
        judged = judge(result(status))
        assert judged[0] is signal
        assert told_domain(*judged, succeeded_before=True) == judged


def test_a_product_page_mentioning_captcha_is_a_success_at_any_size() -> None:
    small = PRODUCT_PAGE.replace(NAV.encode(), b"")
    assert len(small) < MAX_CHALLENGE_BYTES
    # A small page with a review form's CAPTCHA and a handful of links is still a page.
    assert judge(result(200, small)) == (Signal.SUCCESS, "")
    assert judge(result(200, PRODUCT_PAGE * 10)) == (Signal.SUCCESS, "")


def test_a_recaptcha_wall_is_a_block() -> None:
    sorry = b"""<html><head><title>https://www.example.com/search?q=shoes</title></head><body>
<div><form id="captcha-form" action="index" method="post">
<script src="https://www.google.com/recaptcha/api.js" async defer></script>
<div id="recaptcha" class="g-recaptcha" data-sitekey="6LfwuyUT"></div></form>
<div>Our systems have detected unusual traffic from your computer network.</div>
</div></body></html>"""
    signal, reason = judge(result(200, sorry))
    assert signal is Signal.BLOCK
    assert reason == "challenge page (HTTP 200, 'captcha-form' CAPTCHA saying 'unusual traffic')"


def test_a_challenge_page_in_capitals_is_a_block() -> None:
    sorry = b"""<HTML><HEAD><TITLE>Sorry</TITLE></HEAD><BODY>
<FORM ID="CAPTCHA-FORM"><SCRIPT SRC="https://www.google.com/RECAPTCHA/api.js"></SCRIPT></FORM>
<DIV>Our systems have detected UNUSUAL TRAFFIC from your computer network.</DIV>
</BODY></HTML>"""
    signal, reason = judge(result(200, sorry))
    assert signal is Signal.BLOCK
    assert reason == "challenge page (HTTP 200, 'captcha-form' CAPTCHA saying 'unusual traffic')"
    denied = b"<html><head><TITLE>ACCESS DENIED</TITLE></head><body></body></html>"
    assert judge(result(200, denied)) == (
        Signal.BLOCK,
        "challenge page (HTTP 200, title says 'access denied')",
    )


def test_a_challenge_marker_in_a_large_page_is_not_a_block() -> None:
    page = b"<html><head><title>Captcha solvers compared</title></head><body>"
    page += b"<p>text</p>" * 3000 + b"</body></html>"
    assert len(page) > MAX_CHALLENGE_BYTES
    assert judge(result(200, page)) == (Signal.SUCCESS, "")


@pytest.mark.parametrize(
    ("tag", "expected"),
    [
        (b'<script src="https://c.perimeterx.net/main.min.js">', "'perimeterx' CAPTCHA"),
        (b'<script src="https://client-api.arkoselabs.com/v2/api.js">', "'arkoselabs' CAPTCHA"),
        (b"<iframe src=https://x.test/funcaptcha/fc>", "'funcaptcha' CAPTCHA"),
        (b'<script src="https://js.hcaptcha.com/1/api.js">', "'hcaptcha' CAPTCHA saying "),
        (b'<div class="cf-turnstile">', "'cf-turnstile' CAPTCHA saying "),
        (b"<script>window._cf_chl_opt={}</script>", "'_cf_chl_opt' script"),
        (b'<a href="/x">x</a>', ""),
    ],
)
def test_every_wall_vendor_and_widget_is_found_on_a_small_page(tag: bytes, expected: str) -> None:
    page = b"<html><title>One moment</title><body>" + tag + b"<p>Are you a robot?</p></body>"
    signal, reason = judge(result(200, page))
    if not expected:
        assert (signal, reason) == (Signal.SUCCESS, "")
        return
    assert signal is Signal.BLOCK
    assert reason.startswith(f"challenge page (HTTP 200, {expected}")
