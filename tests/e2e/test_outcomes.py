"""The outcome judge: a run that got nothing or lost something says why, and exits 5.

Each test runs ``crawlfleet crawl`` as a user does (issue #37, findings 1 and 2) and reads
its lines and exit code.
"""

from __future__ import annotations

import json
from pathlib import Path

from crawlfleet.demosite import ThreadedDemoSite
from tests.fixtures.cli import run_cli

FAST = ["--delay", "0"]


def crawl(site: ThreadedDemoSite, state: Path, *args: str) -> tuple[int, list[str]]:
    result = run_cli(
        "crawl", site.url("shop"), "--state", str(state), *FAST, *args, cwd=state.parent
    )
    return result.returncode, result.stderr.splitlines()


def test_a_private_seed_without_the_flag_says_why_and_how_and_exits_5(
    testsite: ThreadedDemoSite, tmp_path: Path
) -> None:
    code, lines = crawl(testsite, tmp_path / "state")
    assert code == 5, lines
    seed = [line for line in lines if line.startswith("seed domain 127.0.0.2: 0 pages ok")]
    assert seed == [
        "seed domain 127.0.0.2: 0 pages ok: 1 dead-lettered (forbidden address: a loopback or "
        "private address, refused unless --allow-private-addresses)"
    ]
    assert "no item stored: no page was fetched ok" in lines
    assert (
        "1 URLs dead-lettered (forbidden address 1); retry them: crawlfleet dlq requeue --class "
        f"'forbidden address' --state {tmp_path / 'state'}, then crawl again with "
        "--allow-private-addresses"
    ) in lines
    assert lines[-1].startswith("error: the crawl finished with a shortfall (exit 5)")
    stats = json.loads((tmp_path / "state" / "stats.json").read_text())
    assert [f["kind"] for f in stats["findings"]] == [
        "seed-empty",
        "nothing-stored",
        "dead-letters",
    ]
    # the guard's refusal is its own class, not "robots unavailable", and is not retried
    classes = run_cli("dlq", "classes", "--state", str(tmp_path / "state"), cwd=tmp_path)
    assert "forbidden address" in classes.stdout
    assert "robots unavailable" not in classes.stdout
    assert stats["totals"].get("outcome.retry", 0) == 0


def test_the_resume_trap_says_the_dead_letters_exist_and_how_to_retry_them(
    testsite: ThreadedDemoSite, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    crawl(testsite, state)
    code, lines = crawl(testsite, state, "--allow-private-addresses")
    assert code == 5, lines
    assert (
        "nothing to do: this crawl was already complete (0 done, 1 dead-lettered before this "
        "run); a resumed crawl does not retry its dead letters; --fresh starts it over, "
        "--recrawl revisits its pages"
    ) in lines
    assert any(line.startswith("1 URLs dead-lettered") for line in lines)
    assert "this run: fetched 0 responses (0 pages ok) in" in "\n".join(lines)
    requeue = run_cli(
        "dlq", "requeue", "--class", "forbidden address", "--state", str(state), cwd=tmp_path
    )
    assert (requeue.returncode, requeue.stdout[:11]) == (0, "requeued 1;"), requeue
    code, lines = crawl(testsite, state, "--allow-private-addresses")
    assert code == 0, lines
    text = "\n".join(lines)
    assert "dead-lettered (" not in text
    assert "nothing to do" not in text


def test_allow_shortfall_keeps_the_lines_and_exits_0(
    testsite: ThreadedDemoSite, tmp_path: Path
) -> None:
    code, lines = crawl(testsite, tmp_path / "state", "--allow-shortfall")
    assert code == 0, lines
    assert "no item stored: no page was fetched ok" in lines
    result = run_cli(
        "crawl",
        testsite.url("shop"),
        "--state",
        str(tmp_path / "env"),
        *FAST,
        cwd=tmp_path,
        env={"CRAWLFLEET_ALLOW_SHORTFALL": "1"},
    )
    assert result.returncode == 0, result.stderr


def test_a_recrawl_reports_its_own_figures_and_labels_the_totals(
    testsite: ThreadedDemoSite, tmp_path: Path
) -> None:
    config = tmp_path / "crawl.toml"
    config.write_text('[crawl]\nrecrawl_after = "0s"\n')  # every page due again at once
    args = ["--state", str(tmp_path / "state"), "--config", str(config), *FAST]
    quotes = testsite.url("quotes")
    first = run_cli("crawl", quotes, *args, "--allow-private-addresses", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    again = run_cli("crawl", quotes, *args, "--allow-private-addresses", "--recrawl", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    lines = again.stderr.splitlines()
    assert "crawl summary (totals of all runs)" in again.stderr
    this_run = next(line for line in lines if line.startswith("this run: fetched "))
    totals = next(line for line in lines if line.startswith("crawl totals (all runs): fetched "))
    fetched_now, fetched_all = int(this_run.split()[3]), int(totals.split()[5])
    assert fetched_all == 2 * fetched_now > 0, (this_run, totals)
    assert f"revisits: {fetched_now} unchanged" in again.stderr


def test_tables_are_not_cut_when_the_output_is_no_terminal(
    testsite: ThreadedDemoSite, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    no_columns = {"COLUMNS": ""}  # as in a CI log: no terminal, no COLUMNS
    result = run_cli(
        "crawl", testsite.url("quotes"), "--state", str(state), *FAST,
        "--allow-private-addresses", cwd=tmp_path, env=no_columns,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "…" not in result.stderr
    assert "127.0.0.3" in result.stderr
    assert "parse errors" in result.stderr
    status = run_cli("status", "--state", str(state), cwd=tmp_path, env=no_columns)
    assert status.returncode == 0, status.stderr
    assert "…" not in status.stdout


def test_the_guarded_host_without_proxies_says_its_pages_were_only_redirects(
    testsite: ThreadedDemoSite, tmp_path: Path
) -> None:
    result = run_cli(
        "crawl", testsite.url("guarded"), "--state", str(tmp_path / "state"), *FAST,
        "--allow-private-addresses", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 5, result.stderr
    assert (
        "no item stored: the 1 pages ok were all redirects (3xx) to URLs seen before or out of "
        "scope (a challenge? the site refuses crawlers: see the README's Hard targets (proxies,"
        " the ladder))"
    ) in result.stderr.splitlines()


STRICT_PARSER = """
from pydantic import BaseModel, Field

from crawlfleet.parsing import parser


class Page(BaseModel):
    title: str = Field(min_length=100)


@parser("127.0.0.3", item_type="page", schema=Page)
def page(response):
    yield {"key": response.url, "title": response.css_first("title").text()}
"""


def test_reject_reasons_in_the_summary_and_the_rejects_command(
    testsite: ThreadedDemoSite, tmp_path: Path
) -> None:
    parsers = tmp_path / "strict.py"
    parsers.write_text(STRICT_PARSER)
    state = str(tmp_path / "state")
    result = run_cli(
        "crawl", testsite.url("quotes"), "--state", state, *FAST, "--allow-private-addresses",
        "--parsers", str(parsers), "--max-pages", "1", cwd=tmp_path,
    )  # fmt: skip
    lines = result.stderr.splitlines()
    assert "1 items invalid (kept as rejects; crawlfleet rejects lists them):" in lines, lines
    reason = next(line for line in lines if line.startswith("  1x page: "))
    assert "title" in reason
    assert (
        "no item stored: all 1 items were invalid (kept as rejects: crawlfleet rejects says why)"
    ) in lines
    listed = run_cli("rejects", "--state", state, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "rejected items by reason (1)" in listed.stdout
    assert reason.removeprefix("  1x page: ")[:40] in listed.stdout
    assert testsite.url("quotes") in listed.stdout
