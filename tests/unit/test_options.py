"""Each consumer's options, built from the settings (``runtime/options.py``): the defaults
of an options type are those of ``Settings``, and every key is carried over."""

from __future__ import annotations

from pathlib import Path

from crawlfleet.fetchers.options import FetchOptions
from crawlfleet.pipeline.custom import SinkOptions
from crawlfleet.runtime.fetching.chain import session_options
from crawlfleet.runtime.fetching.session_pool import SessionOptions
from crawlfleet.runtime.options import fetch_options, sink_options
from crawlfleet.settings import Settings
from crawlfleet.settings.proxies import ProxySettings


def test_fetch_options_defaults_are_the_settings() -> None:
    assert fetch_options(Settings()) == FetchOptions()


def test_fetch_options_carry_every_key() -> None:
    settings = Settings(
        user_agent="bot/2",
        allow_private_addresses=True,
        connect_timeout_s=1.5,
        read_timeout_s=2.5,
        total_timeout_s=3.5,
        max_redirects=4,
        max_body_bytes=5000,
        max_decompressed_bytes=6000,
        concurrency=7,
    )
    assert fetch_options(settings) == FetchOptions("bot/2", True, 1.5, 2.5, 3.5, 4, 5000, 6000, 7)


def test_sink_options_name_the_crawl_and_its_state_directory() -> None:
    settings = Settings(crawl_id="books", state_dir=Path("/srv/crawl"))
    assert sink_options(settings) == SinkOptions("books", Path("/srv/crawl"), None)


def test_session_options_defaults_are_the_proxy_settings() -> None:
    assert session_options(ProxySettings()) == SessionOptions()


def test_session_options_carry_every_key() -> None:
    proxies = ProxySettings(sessions_per_domain=3, profiles=["a"], max_wait_s=5, ban_after=7)
    assert session_options(proxies) == SessionOptions(3, ("a",), 5.0, 7)
