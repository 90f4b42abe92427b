"""Operator mistakes with a state directory: another crawl's seeds, --fresh during a crawl."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from crawlfleet.cli.main import app
from crawlfleet.demosite import ThreadedDemoSite
from crawlfleet.errors import StateError
from crawlfleet.settings import Settings
from crawlfleet.sqlitedb import FileLock
from crawlfleet.statedir import StateDir, crawl_identity, identity_hash

FAST = ["--allow-private-addresses", "--delay", "0", "--max-pages", "4"]


def crawl(state: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["crawl", *args, "--state", str(state)])
    return result.exit_code, result.output


def item_count(state: Path) -> int:
    with sqlite3.connect(state / "items.sqlite") as db:
        count: int = db.execute("SELECT count(*) FROM items").fetchone()[0]
    return count


def hosts_fetched(site: ThreadedDemoSite) -> set[str]:
    return {r.role for r in site.log}


def test_another_crawls_seeds_in_the_same_directory_are_refused_in_one_line(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    code, output = crawl(state, site.url("quotes"), *FAST)
    assert code == 0, output
    items = item_count(state)
    site.clear_log()

    code, output = crawl(state, site.url("shop"), *FAST)

    assert code == 2
    assert output.strip().splitlines() == [
        f"error: state directory {state} holds another crawl (seeds differ); resume it with the"
        " same seeds and scope, start over with --fresh, or use another --state"
    ]
    assert site.log == []
    assert item_count(state) == items


def test_the_same_crawl_resumes_and_another_scope_is_refused(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    assert crawl(state, site.url("quotes"), *FAST)[0] == 0
    assert crawl(state, site.url("quotes"), *FAST, "--max-pages", "6")[0] == 0
    code, output = crawl(state, site.url("quotes"), *FAST, "--max-depth", "1")
    assert code == 2
    assert "(max_depth differ)" in output
    code, output = crawl(state, site.url("shop"), *FAST, "--fresh")
    assert code == 0, output
    assert hosts_fetched(site) >= {"shop"}


def test_fresh_keeps_the_users_own_files(site: ThreadedDemoSite, tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    with sqlite3.connect(state / "notes.sqlite") as db:
        db.execute("CREATE TABLE notes (text TEXT)")
        db.execute("INSERT INTO notes VALUES ('mine')")
    (state / "README.sqlite-notes").write_text("mine too")
    assert crawl(state, site.url("quotes"), *FAST)[0] == 0

    code, output = crawl(state, site.url("shop"), *FAST, "--fresh")

    assert code == 0, output
    with sqlite3.connect(state / "notes.sqlite") as db:
        assert db.execute("SELECT text FROM notes").fetchall() == [("mine",)]
    assert (state / "README.sqlite-notes").read_text() == "mine too"
    with sqlite3.connect(state / "items.sqlite") as db:
        urls = [url for (url,) in db.execute("SELECT json_extract(data, '$.url') FROM items")]
    assert urls
    assert all(site.url("shop") in url for url in urls if url)


def test_fresh_while_a_crawl_runs_is_refused_and_deletes_nothing(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    args = ["crawl", site.url("quotes"), "--state", str(state), "--allow-private-addresses"]
    running = subprocess.Popen(
        [sys.executable, "-m", "crawlfleet", *args, "--delay", "0.3"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while not any(r.role == "quotes" and r.path != "/robots.txt" for r in site.log):
            assert running.poll() is None, running.communicate()[1].decode()
            assert time.monotonic() < deadline, "the crawl did not get going"
            time.sleep(0.02)
        before = {p.name: p.stat().st_ino for p in state.iterdir()}

        code, output = crawl(state, site.url("quotes"), *FAST, "--fresh")

        assert code == 2
        assert output.strip().splitlines() == [
            f"error: state directory {state} is in use by another crawl; wait for it to finish"
            " or use another --state"
        ]
        assert {p.name: p.stat().st_ino for p in state.iterdir()} == before
        assert {"state.sqlite", "items.sqlite"} <= set(before)
    finally:
        running.terminate()
        running.communicate(timeout=30)


# The StateDir module on its own.


def identity(seeds: list[str], **settings: object) -> dict[str, object]:
    return crawl_identity(dict(Settings(**settings)), seeds)  # type: ignore[arg-type]


def test_an_identity_hashes_as_crawl_json_recorded_it_before_options() -> None:
    # The hash a crawl.json of the tree before decision 0061 holds: the state directory of
    # a crawl started then is resumed, not refused as another crawl's.
    found = identity(
        ["http://u:p@a.test/", "http://b.test/"], allow=["/a/"], strip_query_params=["x"]
    )
    assert (
        identity_hash(found) == "218030d9aa8a65db71eb3b0bc8182d8bd3cb05bc25db3290ff7659b41a38d702"
    )


def test_identity_ignores_seed_order_and_budgets() -> None:
    assert identity(["http://b/", "http://a/", "http://a/"], max_pages=5) == identity(
        ["http://a/", "http://b/"], delay_s=3
    )
    assert identity(["http://a/"]) != identity(["http://a/"], deny=["/x"])
    assert identity(["http://a/"]) != identity(["http://a/"], crawl_id="other")


def test_a_directory_from_before_identities_is_taken_as_this_crawls(tmp_path: Path) -> None:
    (tmp_path / "state.sqlite").write_bytes(b"")
    StateDir.open(tmp_path, identity(["http://a/"]), fresh=False).release()
    with pytest.raises(StateError, match=r"holds another crawl \(seeds differ\)"):
        StateDir.open(tmp_path, identity(["http://b/"]), fresh=False)
    assert (tmp_path / "state.sqlite").exists()


def test_fresh_is_refused_while_another_command_holds_the_state_file(tmp_path: Path) -> None:
    StateDir.open(tmp_path, identity(["http://a/"]), fresh=False).release()
    (tmp_path / "state.sqlite").write_bytes(b"queue")
    dlq = FileLock(tmp_path / "state.sqlite")  # what `crawlfleet dlq` holds while it works
    try:
        with pytest.raises(StateError, match="in use"):
            StateDir.open(tmp_path, identity(["http://b/"]), fresh=True)
    finally:
        dlq.release()
    assert (tmp_path / "state.sqlite").read_bytes() == b"queue"
    held = StateDir.open(tmp_path, identity(["http://b/"]), fresh=True)
    held.release()
    assert not (tmp_path / "state.sqlite").exists()


def test_a_damaged_identity_file_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "crawl.json").write_text("{not json")
    with pytest.raises(StateError, match=r"cannot read .*crawl\.json .*--fresh"):
        StateDir.open(tmp_path, identity(["http://a/"]), fresh=False)
    StateDir.open(tmp_path, identity(["http://a/"]), fresh=True).release()


def test_fresh_forgets_a_pause(tmp_path: Path) -> None:
    from crawlfleet.statedir import PAUSE_FILE, StateDir

    (tmp_path / PAUSE_FILE).touch()
    StateDir.open(tmp_path, {"seeds": []}, fresh=True).release()
    assert not (tmp_path / PAUSE_FILE).exists()
