"""Operating an embedded crawl: dead letters by error class, pause and resume."""

from __future__ import annotations

import asyncio
import socket
from collections import Counter
from contextlib import AsyncExitStack
from pathlib import Path

from typer.testing import CliRunner

from crawlfleet.cli.main import app
from crawlfleet.clock import SystemClock
from crawlfleet.demosite import ThreadedDemoSite
from crawlfleet.events import EventBus
from crawlfleet.runtime.backends import open_embedded
from crawlfleet.runtime.control import FileControl
from crawlfleet.runtime.local import LocalRunner
from crawlfleet.runtime.policies import domain_policy
from crawlfleet.runtime.wiring import build_crawl
from crawlfleet.settings import Settings

runner = CliRunner(env={"COLUMNS": "300"})
FAST = ["--allow-private-addresses", "--delay", "0", "--concurrency", "8", "--ignore-robots"]
DEAD_FAST = {
    "CRAWLFLEET_MAX_RETRIES": "0",
    "CRAWLFLEET_READ_TIMEOUT_S": "0.3",
    "CRAWLFLEET_CONNECT_TIMEOUT_S": "2",
}


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/gone"


def dead_seeds(site: ThreadedDemoSite) -> list[str]:
    """Five URLs that die at once: two 500s, a 502, a read timeout, a refused connection."""
    return [
        site.url("lab", "/status/500?n=1"),
        site.url("lab", "/status/500?n=2"),
        site.url("lab", "/status/502"),
        site.url("lab", "/slow?delay_ms=1500"),
        closed_port_url(),
    ]


def cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = runner.invoke(app, list(args), env=env)
    return result.exit_code, result.output


def lab_paths(site: ThreadedDemoSite) -> Counter[str]:
    return Counter(r.path for r in site.log if r.role == "lab" and r.path != "/robots.txt")


def test_dead_letters_listed_requeued_and_purged_by_class(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    state = str(tmp_path / "state")
    seeds = dead_seeds(site)
    code, output = cli("crawl", "--state", state, *seeds, *FAST, env=DEAD_FAST)
    assert code == 5, output  # dead letters left: a shortfall
    assert "5 dead-lettered" in output

    code, output = cli("dlq", "classes", "--state", state)
    assert code == 0, output
    cells = [line.split("│")[1:3] for line in output.splitlines() if line.count("│") >= 3]
    rows = [(name.strip(), count.strip()) for name, count in cells if count.strip()]
    assert rows == [
        ("HTTP 500", "2"),
        ("HTTP 502", "1"),
        ("connection refused", "1"),
        ("timeout", "1"),
    ]
    assert "/status/500?n=1" in output

    code, output = cli("dlq", "requeue", "--class", "HTTP 500", "--state", state)
    assert (code, "requeued 2" in output) == (0, True), output
    site.clear_log()
    code, output = cli("crawl", "--state", state, *seeds, *FAST, env=DEAD_FAST)
    assert code == 5, output  # the requeued letters died again: still a shortfall
    assert lab_paths(site) == Counter({"/status/500?n=1": 1, "/status/500?n=2": 1})

    code, output = cli("dlq", "purge", "--class", "timeout", "--state", state)
    assert (code, "purged 1" in output) == (0, True), output
    code, output = cli("dlq", "list", "--by-class", "--state", state)
    assert "timeout" not in output
    assert "HTTP 502" in output

    code, output = cli("dlq", "requeue", "abc", "--class", "HTTP 500", "--state", state)
    assert code == 2
    assert output.startswith("error: give fingerprints or --class NAME, not both")


async def test_a_paused_embedded_crawl_claims_nothing_until_resumed(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    settings = Settings(
        state_dir=tmp_path / "state", allow_private_addresses=True, delay_s=0.0, max_depth=1
    )
    seeds = [site.url("shop")]
    control = FileControl(settings.state_dir)
    async with AsyncExitStack() as stack:
        backends = await open_embedded(
            settings, stack, policy=domain_policy(settings), seeds=seeds, fresh=False
        )
        events = EventBus()
        graph = await build_crawl(
            settings, seeds=seeds, backends=backends, events=events, clock=SystemClock(),
            stack=stack,
        )  # fmt: skip
        await control.set_paused(True)
        local = LocalRunner(
            graph.crawler, concurrency=4, clock=SystemClock(), events=events,
            crawl_id=settings.crawl_id, control=control,
        )  # fmt: skip
        running = asyncio.create_task(local.run(seeds))
        for _ in range(16):  # 0.8 s: more than one tick of the claim loop
            await asyncio.sleep(0.05)
        assert [r.path for r in site.log if r.role == "shop" and r.path != "/robots.txt"] == []
        state = str(settings.state_dir)  # the command runs in a thread: it starts its own loop
        code, output = await asyncio.to_thread(cli, "resume", "--state", state)
        assert code == 0, output
        result = await asyncio.wait_for(running, timeout=60)
    assert result.complete
    assert result.counts.done > 1


def test_status_shows_a_paused_embedded_crawl(site: ThreadedDemoSite, tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    code, output = cli(
        "crawl", "--state", state, site.url("lab", "/page/1"), *FAST, "--max-depth", "0"
    )
    assert code == 0, output
    assert cli("pause", "--state", state)[0] == 0
    assert "(paused)" in cli("status", "--state", state)[1]
    assert cli("resume", "--state", state)[0] == 0
    assert "(paused)" not in cli("status", "--state", state)[1]


async def test_the_crawl_api_honours_a_pause_asked_from_the_cli(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    from crawlfleet.api import Crawl
    from crawlfleet.statedir import PAUSE_FILE

    state = tmp_path / "state"
    seed = site.url("quotes")
    settings = Settings(
        seeds=[seed], state_dir=state, allow_private_addresses=True, delay_s=0, max_pages=5
    )
    state.mkdir()
    (state / PAUSE_FILE).touch()  # what `crawlfleet pause --state` leaves (it needs a state file)
    crawl = Crawl(settings)
    running = asyncio.create_task(crawl.run_async())
    await asyncio.sleep(0.8)
    assert not [r for r in site.log if r.role == "quotes" and r.path != "/robots.txt"]
    assert (await asyncio.to_thread(cli, "resume", "--state", str(state)))[0] == 0
    result = await asyncio.wait_for(running, timeout=30)
    assert result.complete
    assert result.stats.pages == 5
