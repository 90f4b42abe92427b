"""``status`` and the dashboard say where a domain's delay came from (issue #37.6): the
``--delay`` flag (``cli``), the config file (``file``), a ``CRAWLFLEET_DELAY_S`` variable
(``env``), nothing (``default``) or a ``[crawl.domains]`` entry (``override``)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from crawlfleet.demosite import ThreadedDemoSite
from tests.e2e.test_limits_reported import dashboard_pages
from tests.fixtures.cli import run_cli

HOST = "127.0.0.3"  # the demo's quotes host


def delay_cell(site: ThreadedDemoSite, cwd: Path, *args: str, env: dict[str, str]) -> str:
    """The delay cell of the quotes host's row in ``status --state`` after a one-page crawl."""
    crawl = run_cli(
        "crawl", site.url("quotes"), "--state", "state", "--allow-private-addresses",
        "--max-pages", "1", *args, cwd=cwd, env=env,
    )  # fmt: skip
    assert crawl.returncode == 0, crawl.stderr
    status = run_cli("status", "--state", "state", cwd=cwd)
    assert status.returncode == 0, status.stderr
    (row,) = [line for line in status.stdout.splitlines() if HOST in line]
    cells = [cell.strip() for cell in row.strip("│ ").split("│")]
    return cells[7]


@pytest.mark.parametrize(
    ("args", "config", "env", "shown"),
    [
        (["--delay", "0"], "delay_s = 0.05", {}, "0 s (cli)"),
        ([], "delay_s = 0.05", {}, "0.05 s (file)"),
        ([], "delay_s = 0.05", {"CRAWLFLEET_DELAY_S": "0.02"}, "0.02 s (env)"),
        ([], "", {}, "1 s (default)"),
        (["--delay", "0"], f'[domains."{HOST}"]\ndelay_s = 0.01', {}, "0.01 s (override)"),
    ],
    ids=["cli", "file", "env", "default", "override"],
)
def test_status_shows_which_layer_gave_the_delay(
    site: ThreadedDemoSite,
    tmp_path: Path,
    args: list[str],
    config: str,
    env: dict[str, str],
    shown: str,
) -> None:
    (tmp_path / "crawl.toml").write_text(config + "\n")
    assert delay_cell(site, tmp_path, "--config", "crawl.toml", *args, env=env) == shown


def test_the_dashboard_and_its_api_show_the_same_source(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    (tmp_path / "crawl.toml").write_text("delay_s = 0.05\n")
    assert delay_cell(site, tmp_path, "--config", "crawl.toml", env={}) == "0.05 s (file)"
    page, api = dashboard_pages(tmp_path / "state", "/crawl/default", "/api/crawl/default")
    assert "0.05 s (file)" in page
    (row,) = orjson.loads(api)["domains"]
    assert (row["delay_s"], row["delay_source"]) == (0.05, "file")


def test_delay_source_is_not_a_key_to_set(site: ThreadedDemoSite, tmp_path: Path) -> None:
    (tmp_path / "crawl.toml").write_text('delay_source = "robots"\n')
    refused = run_cli("crawl", site.url("quotes"), "--config", "crawl.toml", cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.startswith("error: unknown setting 'delay_source' (in the config file)")
