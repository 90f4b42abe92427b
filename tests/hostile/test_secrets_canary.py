"""A canary password in every DSN and URL form, grepped across every output, file and table.

Each command runs for real (the installed ``crawlfleet``): a PostgreSQL DSN and Redis URLs
that cannot connect, and an embedded crawl whose seed carries the canary in its userinfo.
"""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import pytest

from crawlfleet.demosite import ThreadedDemoSite
from tests.fixtures.cli import run_cli

CANARY = "Canary-5c1d-pw"
CLOSED = "127.0.0.1:1"  # nothing listens on port 1: every connection is refused at once


def _outputs(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout + result.stderr


def _every_file(root: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in root.rglob("*") if path.is_file()}


def _every_table(database: Path) -> str:
    with sqlite3.connect(database) as connection:
        return "\n".join(connection.iterdump())


@pytest.mark.parametrize(
    "command",
    [
        ("db", "migrate", "--postgres", f"host=127.0.0.1 port=1 user=u password={CANARY}"),
        ("db", "migrate", "--postgres", f"host=127.0.0.1 port=1 password='{CANARY}' dbname=x"),
        ("db", "migrate", "--postgres", f"postgresql://u:{CANARY}@{CLOSED}/db"),
        ("db", "migrate", "--postgres", f"postgresql://u@{CLOSED}/db?password={CANARY}"),
        ("status", "--redis", f"redis://u:{CANARY}@{CLOSED}/0"),
        ("status", "--redis", f"redis://{CLOSED}/0?password={CANARY}"),
        ("status", "--redis", f"redis://:{CANARY}@127.0.0.1:99999/0"),
        (
            "crawl", "--redis", f"redis://{CLOSED}/0?password={CANARY}",
            "--postgres", f"host=127.0.0.1 port=1 password={CANARY}", "http://127.0.0.2:1/",
        ),
        (
            "crawl", "--redis", f"redis://u:{CANARY}@127.0.0.1:99999/0",
            "--postgres", f"postgresql://u:{CANARY}@{CLOSED}/db", "http://127.0.0.2:1/",
        ),
        (
            "worker", "--redis", f"redis://u:{CANARY}@{CLOSED}/0",
            "--postgres", f"host=127.0.0.1 port=1 password={CANARY}",
        ),
    ],
)  # fmt: skip
def test_a_failing_connection_never_echoes_the_password(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    result = run_cli(*command, cwd=tmp_path)
    assert result.returncode == 2, _outputs(result)
    assert result.stderr.startswith("error: ")
    assert CANARY not in _outputs(result)
    assert all(CANARY.encode() not in data for data in _every_file(tmp_path).values())


@pytest.mark.slow
def test_seed_credentials_reach_no_output_file_or_table(
    tmp_path: Path, testsite: ThreadedDemoSite
) -> None:
    seed = testsite.url("quotes", "/").replace("http://", f"http://reader:{CANARY}@")
    state, out = tmp_path / "state", tmp_path / "items.jsonl"
    crawl = run_cli(
        "crawl", seed, "--state", str(state), "-o", str(out), "--max-pages", "4",
        "--delay", "0", "--allow-private-addresses", cwd=tmp_path,
    )  # fmt: skip
    assert crawl.returncode == 0, _outputs(crawl)
    exported = run_cli(
        "export", "--state", str(state), "-o", str(tmp_path / "again.csv"), cwd=tmp_path
    )
    listed = run_cli("dlq", "list", "--state", str(state), cwd=tmp_path)
    outputs = "".join(_outputs(r) for r in (crawl, exported, listed))
    files = _every_file(tmp_path)
    tables = [_every_table(path) for path in files if path.suffix == ".sqlite"]
    assert out.read_text().count("\n") >= 2
    assert len(tables) >= 2
    assert CANARY not in outputs
    assert [path for path, data in files.items() if CANARY.encode() in data] == []
    assert all(CANARY not in dump for dump in tables)
    assert "reader" not in "".join(tables)
