"""No silently ignored input (issue #37.8): each of these did nothing, or the wrong thing, and
said nothing; now it works or is refused in one line."""

from __future__ import annotations

import re
from pathlib import Path

from crawlfleet.demosite import ThreadedDemoSite
from tests.fixtures.cli import assert_one_line_error, run_cli


def test_a_key_above_the_crawl_table_is_refused(testsite: ThreadedDemoSite, tmp_path: Path) -> None:
    config = tmp_path / "crawl.toml"
    config.write_text("max_pages = 2\n\n[crawl]\ndelay_s = 0\nallow_private_addresses = true\n")
    result = run_cli(
        "crawl", testsite.url("quotes"), "--config", str(config), "--state", str(tmp_path / "s"),
        cwd=tmp_path,
    )  # fmt: skip
    assert assert_one_line_error(result) == (
        f"error: config file {config}: 'max_pages' is above [crawl], where nothing is read: "
        "move it under [crawl] (or drop the [crawl] header and keep every key top-level)"
    )
    assert not (tmp_path / "s" / "state.sqlite").exists()


def dead_crawl(site: ThreadedDemoSite, tmp_path: Path) -> str:
    """A crawl with one dead letter (a private address refused); its state directory."""
    state = str(tmp_path / "state")
    run_cli("crawl", site.url("shop"), "--state", state, "--delay", "0", cwd=tmp_path)
    return state


def test_dlq_requeue_takes_the_fingerprint_dlq_list_prints(
    testsite: ThreadedDemoSite, tmp_path: Path
) -> None:
    state = dead_crawl(testsite, tmp_path)
    listed = run_cli("dlq", "list", "--state", state, cwd=tmp_path)
    printed = re.findall(r"│ ([0-9a-f]{12}) ", listed.stdout)
    assert len(printed) == 1, listed.stdout
    unknown = run_cli("dlq", "requeue", "ffffffffffff", "--state", state, cwd=tmp_path)
    assert assert_one_line_error(unknown) == (
        "error: no dead letter with fingerprint 'ffffffffffff' (see: dlq list)"
    )
    purge_unknown = run_cli("dlq", "purge", "0000", "--state", state, cwd=tmp_path)
    assert_one_line_error(purge_unknown)
    requeued = run_cli("dlq", "requeue", printed[0], "--state", state, cwd=tmp_path)
    assert requeued.returncode == 0, requeued.stderr
    assert requeued.stdout.startswith("requeued 1;"), requeued.stdout


def test_operating_commands_honour_the_environment_and_an_explicit_state_wins(
    testsite: ThreadedDemoSite, redis_url: str, tmp_path: Path
) -> None:
    env = {"CRAWLFLEET_REDIS_URL": redis_url}
    status = run_cli("status", cwd=tmp_path, env=env)
    assert status.returncode == 0, status.stderr
    assert "crawls" in status.stdout
    assert "workers" in status.stdout
    state = dead_crawl(testsite, tmp_path)
    embedded = run_cli("status", "--state", state, cwd=tmp_path, env=env)
    assert embedded.returncode == 0, embedded.stderr
    assert f"crawl in {state}" in embedded.stdout
    dlq = run_cli("dlq", "classes", "--state", state, cwd=tmp_path, env=env)
    assert dlq.returncode == 0, dlq.stderr
    assert "forbidden address" in dlq.stdout
