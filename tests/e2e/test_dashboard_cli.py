"""``crawlfleet dashboard`` refuses bad input with one line."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.cli import assert_one_line_error, run_cli


def test_the_dashboard_needs_a_state_dir_and_a_long_enough_token(tmp_path: Path) -> None:
    assert "--state DIR" in assert_one_line_error(run_cli("dashboard", cwd=tmp_path))
    missing = run_cli("dashboard", "--state", str(tmp_path / "none"), cwd=tmp_path)
    assert "no state directory" in assert_one_line_error(missing)
    short = run_cli("dashboard", "--state", str(tmp_path), "--token", "abc", cwd=tmp_path)
    assert "at least 12 characters" in assert_one_line_error(short)
