"""``crawlfleet proxies``: each proxy by id and address, its tier, state and health."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from typer.testing import CliRunner

from crawlfleet.cli.main import app
from crawlfleet.proxies.protocols import Cooldown
from crawlfleet.proxies.sqlite import SqliteProxyStates


async def record(path: Path) -> None:
    states = await SqliteProxyStates.open(path)
    await states.register("px-aaaaaaaaaa", 1, "127.0.0.1:8902")
    await states.register("px-bbbbbbbbbb", 0, "direct")
    await states.success("px-bbbbbbbbbb", time.time(), 0.05, count=3)
    await states.penalize(
        "px-aaaaaaaaaa", time.time(), error=False, quarantine=True, cooldown=Cooldown(600, 600)
    )
    await states.close()


def test_lists_quarantined_and_ok_proxies_by_tier(tmp_path: Path) -> None:
    asyncio.run(record(tmp_path / "state.sqlite"))
    result = CliRunner().invoke(app, ["proxies", "--state", str(tmp_path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "px-" in line]
    assert "px-bbbbbbbbbb" in lines[0]  # tier 0 first
    assert " ok " in lines[0]
    assert "50 ms" in lines[0]
    assert "127.0.0.1:8902" in lines[1]
    assert "quarantined until" in lines[1]


def test_a_crawl_without_state_or_proxies(tmp_path: Path) -> None:
    missing = CliRunner().invoke(app, ["proxies", "--state", str(tmp_path / "none")])
    assert missing.exit_code == 2
    assert "no crawl state in" in missing.output
    (tmp_path / "state.sqlite").touch()
    empty = CliRunner().invoke(app, ["proxies", "--state", str(tmp_path)])
    assert empty.exit_code == 0, empty.output
    assert "it has no [crawl.proxies]" in empty.output
