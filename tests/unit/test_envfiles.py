"""Secrets given as files: ``CRAWLFLEET_<NAME>_FILE`` (``crawlfleet.envfiles``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawlfleet.cli.demo_site import role_addresses
from crawlfleet.demosite.roles import DEFAULT_ADDRESSES
from crawlfleet.envfiles import load_env_files
from crawlfleet.errors import ConfigError

DSN = "postgresql://crawlfleet:s3cret@db:5432/crawl"


def secret(tmp_path: Path, text: str, name: str = "secret") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_a_file_sets_its_variable_without_the_trailing_newline(tmp_path: Path) -> None:
    environ = {"CRAWLFLEET_POSTGRES_DSN_FILE": secret(tmp_path, DSN + "\n")}
    assert load_env_files(environ) == ["CRAWLFLEET_POSTGRES_DSN"]
    assert environ["CRAWLFLEET_POSTGRES_DSN"] == DSN


def test_site_secrets_and_the_dashboard_token_take_files(tmp_path: Path) -> None:
    environ = {
        "CRAWLFLEET_SECRET_SHOP_EXAMPLE_PASSWORD_FILE": secret(tmp_path, "pw", "a"),
        "CRAWLFLEET_DASHBOARD_TOKEN_FILE": secret(tmp_path, "token\r\n", "b"),
    }
    load_env_files(environ)
    assert environ["CRAWLFLEET_SECRET_SHOP_EXAMPLE_PASSWORD"] == "pw"
    assert environ["CRAWLFLEET_DASHBOARD_TOKEN"] == "token"


def test_other_variables_ending_in_file_are_left_alone(tmp_path: Path) -> None:
    environ = {
        "CRAWLFLEET_SECRETS_FILE": str(tmp_path / "secrets.toml"),  # the secrets_file setting
        "CRAWLFLEET_OUTPUT_FILE": "x",
        "HOME_FILE": "y",
    }
    assert load_env_files(environ) == []
    assert set(environ) == {"CRAWLFLEET_SECRETS_FILE", "CRAWLFLEET_OUTPUT_FILE", "HOME_FILE"}


@pytest.mark.parametrize(
    ("content", "error"),
    [
        (None, "CRAWLFLEET_REDIS_URL_FILE: file not found: "),
        ("", "CRAWLFLEET_REDIS_URL_FILE: .* is empty"),
        ("\n", "CRAWLFLEET_REDIS_URL_FILE: .* is empty"),
        ("redis://a\nredis://b\n", "more than one line"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_an_unusable_file_is_a_one_line_error_without_its_content(
    tmp_path: Path, content: str | bytes | None, error: str
) -> None:
    path = tmp_path / "redis_url"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError, match=error) as raised:
        load_env_files({"CRAWLFLEET_REDIS_URL_FILE": str(path)})
    assert "redis://" not in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_variable_and_its_file_twin_together_are_refused(tmp_path: Path) -> None:
    environ = {
        "CRAWLFLEET_POSTGRES_DSN": DSN,
        "CRAWLFLEET_POSTGRES_DSN_FILE": secret(tmp_path, DSN),
    }
    with pytest.raises(ConfigError, match=r"both CRAWLFLEET_POSTGRES_DSN and .*_FILE are set"):
        load_env_files(environ)


def test_demo_site_addresses_move_roles_and_keep_the_others() -> None:
    addresses = role_addresses(["shop=10.201.7.41", "quotes = 10.201.7.42"])
    assert addresses == {**DEFAULT_ADDRESSES, "shop": "10.201.7.41", "quotes": "10.201.7.42"}
    assert role_addresses([]) == dict(DEFAULT_ADDRESSES)
    for bad in (["shop"], ["shop=not-an-ip"], ["nowhere=10.0.0.1"], ["shop=::1", "shop=::2"]):
        with pytest.raises(ValueError, match="--address"):
            role_addresses(bad)
