"""Operator mistakes through the real CLI: exit 2 and one ``error:`` line, never a traceback."""

from __future__ import annotations

import asyncio
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from crawlfleet.models import Item
from crawlfleet.pipeline.export import ITEMS_FILE
from crawlfleet.pipeline.sinks.sqlite import SqliteSink
from tests.fixtures.cli import assert_one_line_error, run_cli

SEED = "http://127.0.0.2:1/"


def _mount_tmpfs(path: Path, *options: str) -> bool:
    path.mkdir()
    opts = ",".join(("size=64k", *options))
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)], check=False)
    return done.returncode == 0


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs (root can fill it: quotas of a filesystem bind root too)."""
    path = tmp_path / "small"
    if not _mount_tmpfs(path):
        pytest.skip("cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN)")
    yield path
    subprocess.run(["umount", str(path)], check=True)


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A read-only tmpfs: refuses writes even to root (EROFS), unlike chmod 555."""
    path = tmp_path / "ro"
    if not _mount_tmpfs(path, "ro"):
        pytest.skip("cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN)")
    yield path
    subprocess.run(["umount", str(path)], check=True)


def test_config_that_is_a_directory(tmp_path: Path) -> None:
    line = assert_one_line_error(run_cli("crawl", "--config", str(tmp_path), SEED, cwd=tmp_path))
    assert "Is a directory" in line


def test_bad_json_in_an_environment_variable(tmp_path: Path) -> None:
    result = run_cli("crawl", SEED, cwd=tmp_path, env={"CRAWLFLEET_SEEDS": "[oops"})
    assert "CRAWLFLEET_SEEDS" in assert_one_line_error(result)


def test_state_under_a_file(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    result = run_cli("crawl", "--state", "a-file/state", SEED, cwd=tmp_path)
    assert "Not a directory" in assert_one_line_error(result)


def test_state_on_a_read_only_filesystem(tmp_path: Path, read_only_dir: Path) -> None:
    result = run_cli("crawl", "--state", str(read_only_dir / "state"), SEED, cwd=tmp_path)
    assert "Read-only file system" in assert_one_line_error(result)


def test_export_to_a_full_disk(tmp_path: Path, small_disk: Path) -> None:
    async def store_items() -> None:
        sink = await SqliteSink.open(tmp_path / ITEMS_FILE)
        try:
            await sink.write(
                [Item("page", {"text": f"{n} " + "x" * 2000}, key=str(n)) for n in range(200)]
            )
        finally:
            await sink.close()

    asyncio.run(store_items())
    out = small_disk / "items.jsonl"
    result = run_cli("export", "--state", str(tmp_path), "-o", str(out), cwd=tmp_path)
    assert "No space left on device" in assert_one_line_error(result)
    assert list(small_disk.iterdir()) == []


@pytest.mark.parametrize(
    "command",
    [
        ("crawl", "--redis", "redis://127.0.0.1:99999/0", "--postgres", "host=h", SEED),
        ("status", "--redis", "redis://127.0.0.1:99999/0"),
        ("worker", "--redis", "redis://127.0.0.1:99999/0", "--postgres", "host=h"),
    ],
)
def test_bad_port_in_a_redis_url(tmp_path: Path, command: tuple[str, ...]) -> None:
    line = assert_one_line_error(run_cli(*command, cwd=tmp_path))
    assert "99999" in line or "Port out of range" in line


@pytest.mark.parametrize("value", ["inf", "nan", "-inf"])
def test_delay_must_be_finite(tmp_path: Path, value: str) -> None:
    result = run_cli("crawl", "--delay", value, "--state", "s", SEED, cwd=tmp_path)
    assert "delay_s" in assert_one_line_error(result)


@pytest.mark.slow
def test_dead_letter_with_markup_in_its_url(tmp_path: Path) -> None:
    """``[/]`` in a URL crashed ``dlq list`` (rich markup); every dynamic string is escaped."""
    url = "http://127.0.0.1:1/a[/]b[red]c[/red]"
    crawl = run_cli(
        "crawl", url, "--state", "s", "--allow-private-addresses", "--ignore-robots",
        cwd=tmp_path, env={"CRAWLFLEET_MAX_RETRIES": "0"},
    )  # fmt: skip
    assert crawl.returncode == 5, crawl.stderr  # its one URL dead-lettered: a shortfall
    assert "/a[/]b[red]c[/red]" not in crawl.stderr  # the outcome lines name no URL
    listed = run_cli("dlq", "list", "--state", "s", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "/a[/]b[red]c[/red]" in listed.stdout
    fingerprint = re.search(r"│ ([0-9a-f]{12}) │", listed.stdout)[1]  # type: ignore[index]
    shown = run_cli("dlq", "show", fingerprint, "--state", "s", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert url in shown.stdout


def test_an_error_message_with_markup_is_printed_as_it_is(tmp_path: Path) -> None:
    result = run_cli("dlq", "list", "--state", "st[/]a[red]te", cwd=tmp_path)
    assert "st[/]a[red]te" in assert_one_line_error(result)


def test_a_regex_re2_refuses_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "crawl.toml"
    config.write_text("[crawl]\ndeny = ['(a)\\1']\n")
    result = run_cli("crawl", "--config", str(config), "--state", "s", SEED, cwd=tmp_path)
    assert "bad setting 'deny'" in assert_one_line_error(result)
