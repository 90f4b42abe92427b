"""Logging as users expect (issue #37.5): every command logs to stderr at a level and in a
format the user picks, and the events the README calls "logged" appear."""

from __future__ import annotations

import json
from pathlib import Path

from crawlfleet.demosite import ThreadedDemoSite
from tests.e2e.conftest import PICKY_LADDER
from tests.e2e.test_strategy_ladder import FAST
from tests.fixtures.cli import assert_one_line_error, run_cli

LADDER_LINE = "INFO crawlfleet.runtime.attempts: domain 127.0.0.4 escalated to level 1, rung slow"


def ladder_crawl(
    site: ThreadedDemoSite, tmp_path: Path, *options: str, env: dict[str, str] | None = None
) -> tuple[int, str]:
    tmp_path.mkdir(exist_ok=True)
    config = tmp_path / "crawl.toml"
    config.write_text(PICKY_LADDER)
    state = str(tmp_path / "state")
    seed = site.url("lab", "/picky/")
    args = ["crawl", seed, "--config", str(config), "--state", state, *FAST]
    result = run_cli(*options, *args, cwd=tmp_path, env=env, timeout_s=120)
    return result.returncode, result.stderr


def test_strategy_ladder_changes_are_logged_by_default(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    code, stderr = ladder_crawl(site, tmp_path)
    assert code == 0, stderr
    assert any(line.startswith(LADDER_LINE + ": ") for line in stderr.splitlines()), stderr


def test_quiet_drops_them_and_the_environment_picks_json(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    code, stderr = ladder_crawl(site, tmp_path / "q", "-q")
    assert code == 0, stderr
    assert "escalated" not in stderr
    env = {"CRAWLFLEET_LOG_FORMAT": "json", "CRAWLFLEET_LOG_LEVEL": "info"}
    code, stderr = ladder_crawl(site, tmp_path / "j", env=env)
    assert code == 0, stderr
    records = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    ladder = [r for r in records if "escalated to level 1" in r["message"]]
    assert ladder, stderr
    assert ladder[0]["level"] == "INFO"
    assert ladder[0]["logger"] == "crawlfleet.runtime.attempts"
    assert set(ladder[0]) == {"at", "level", "logger", "message"}


def test_debug_on_any_command_and_a_bad_level_is_one_line(tmp_path: Path) -> None:
    listed = run_cli("--log-level", "DEBUG", "dlq", "list", "--state", str(tmp_path), cwd=tmp_path)
    assert listed.returncode in (0, 2), listed.stderr
    bad = run_cli("--log-level", "loud", "status", cwd=tmp_path)
    assert assert_one_line_error(bad) == (
        "error: unknown log level 'loud' (DEBUG, INFO, WARNING, ERROR or CRITICAL)"
    )
    both = run_cli("-v", "-q", "status", cwd=tmp_path)
    assert assert_one_line_error(both) == "error: give -v or -q, not both"
