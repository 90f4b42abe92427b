"""Proxy tiers from the config, a proxies file or the environment; ids show no credentials."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawlfleet.errors import ConfigError
from crawlfleet.proxies.endpoints import DIRECT, build_tiers, load_tiers, proxy_id
from crawlfleet.settings.loading import load_settings


def test_tiers_keep_order_and_split_credentials_from_the_url() -> None:
    tiers = build_tiers([["direct"], ["http://127.0.0.1:8901", "http://u:p%40ss@127.0.0.1:8902"]])
    assert [[e.tier for e in tier] for tier in tiers] == [[0], [1, 1]]
    direct, plain, auth = tiers[0][0], tiers[1][0], tiers[1][1]
    assert (direct.is_direct, direct.label) == (True, DIRECT)
    assert (plain.url, plain.auth) == ("http://127.0.0.1:8901", None)
    assert (auth.url, auth.auth) == ("http://127.0.0.1:8902", ("u", "p@ss"))
    assert "p@ss" not in repr(auth) + auth.label + auth.id
    assert "u" not in auth.label.removeprefix(auth.id)


def test_an_id_is_stable_and_names_scheme_host_port_and_user_only() -> None:
    one = build_tiers([["http://u:secret1@127.0.0.1:8902"]])[0][0].id
    two = build_tiers([["http://u:secret2@127.0.0.1:8902"]])[0][0].id
    assert one == two == proxy_id("http", "127.0.0.1", 8902, "u")
    assert one != build_tiers([["http://v:secret1@127.0.0.1:8902"]])[0][0].id
    assert one.startswith("px-")
    assert len(one) == 13


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ("socks5://u:pw@127.0.0.1:1080", "SOCKS proxies are not supported"),
        ("ftp://127.0.0.1:21", "neither 'direct' nor"),
        ("http://u:hunter2@127.0.0.1:99999", "not a URL"),
        ("http://127.0.0.1:8080/path", "has a path or query"),
    ],
)
def test_a_bad_entry_is_one_line_without_its_secret(entry: str, why: str) -> None:
    with pytest.raises(ConfigError) as raised:
        build_tiers([[entry]])
    assert why in str(raised.value)
    assert "pw" not in str(raised.value)
    assert "hunter2" not in str(raised.value)
    assert "\n" not in str(raised.value)


def test_empty_tiers_and_duplicates_are_refused() -> None:
    with pytest.raises(ConfigError, match="tier 1 is empty"):
        build_tiers([["direct"], []])
    with pytest.raises(ConfigError, match="listed twice"):
        build_tiers([["http://127.0.0.1:1"], ["http://127.0.0.1:1"]])
    with pytest.raises(ConfigError, match="needs tiers"):
        load_tiers([], None)


def test_a_proxies_file_has_one_url_per_line_and_dashes_between_tiers(tmp_path: Path) -> None:
    path = tmp_path / "proxies.txt"
    path.write_text("# datacenter\nhttp://127.0.0.1:1\n\nhttp://127.0.0.1:2\n---\ndirect\n")
    tiers = load_tiers([["ignored-when-a-file-is-given"]], path)
    assert [[e.url for e in tier] for tier in tiers] == [
        ["http://127.0.0.1:1", "http://127.0.0.1:2"],
        [None],
    ]
    with pytest.raises(ConfigError, match="cannot read proxies file"):
        load_tiers([], tmp_path / "missing.txt")


def test_the_config_table_and_the_environment_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "crawl.toml"
    config.write_text(
        '[crawl.proxies]\ntiers = [["direct"], ["http://127.0.0.1:8901"]]\n'
        'rotation = "least_recently_used"\n'
    )
    settings = load_settings(config)
    assert settings.proxies is not None
    assert settings.proxies.tiers == [["direct"], ["http://127.0.0.1:8901"]]
    assert settings.proxies.rotation == "least_recently_used"
    monkeypatch.setenv("CRAWLFLEET_PROXIES", '{"tiers": [["http://127.0.0.1:8902"]]}')
    from_env = load_settings()
    assert from_env.proxies is not None
    assert from_env.proxies.tiers == [["http://127.0.0.1:8902"]]
    monkeypatch.setenv("CRAWLFLEET_PROXIES", '{"rotation": "random"}')
    with pytest.raises(ConfigError, match=r"proxies\.rotation"):
        load_settings()
