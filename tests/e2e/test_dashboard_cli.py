"""``crawlfleet dashboard`` refuses bad input with one line, embedded or distributed."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.cli import assert_one_line_error, run_cli


def test_the_dashboard_needs_a_state_dir_and_a_long_enough_token(tmp_path: Path) -> None:
    assert "--state DIR" in assert_one_line_error(run_cli("dashboard", cwd=tmp_path))
    missing = run_cli("dashboard", "--state", str(tmp_path / "none"), cwd=tmp_path)
    assert "no state directory" in assert_one_line_error(missing)
    short = run_cli("dashboard", "--state", str(tmp_path), "--token", "abc", cwd=tmp_path)
    assert "at least 12 characters" in assert_one_line_error(short)


def test_the_distributed_dashboard_needs_both_backends_and_fails_in_one_line(
    tmp_path: Path,
) -> None:
    only_redis = run_cli("dashboard", "--redis", "redis://127.0.0.1:1/0", cwd=tmp_path)
    assert "both --redis URL and --postgres DSN" in assert_one_line_error(only_redis)
    both = run_cli(
        "dashboard", "--state", str(tmp_path), "--redis", "redis://127.0.0.1:1/0", cwd=tmp_path
    )
    assert "not both" in assert_one_line_error(both)
    bad = run_cli("dashboard", "--redis", "http://x", "--postgres", "dbname=x", cwd=tmp_path)
    assert "bad --redis" in assert_one_line_error(bad)
    down = run_cli(
        "dashboard", "--redis", "redis://:secret@127.0.0.1:1/0", "--postgres", "dbname=x",
        cwd=tmp_path,
    )  # fmt: skip
    message = assert_one_line_error(down)
    assert "Redis at redis://" in message
    assert "secret" not in message


def test_a_redis_url_in_the_config_does_not_make_a_state_dir_distributed(tmp_path: Path) -> None:
    config = tmp_path / "crawl.toml"
    config.write_text('redis_url = "redis://127.0.0.1:1/0"\ndelay_s = 2.0\n')
    missing = run_cli(
        "dashboard", "--state", str(tmp_path / "none"), "--config", str(config), cwd=tmp_path
    )
    assert "no state directory" in assert_one_line_error(missing)
