"""``examples/login``: log in through the CSRF form, stay logged in, read every order."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import orjson
from click.testing import Result
from typer.testing import CliRunner

from crawlfleet.cli.main import app
from crawlfleet.demosite import ThreadedDemoSite
from crawlfleet.demosite.members import MEMBER_PASSWORD, ORDERS, SESSION_PAGE_VIEWS, STAFF_PASSWORD

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "login"
FAST = ["--delay", "0", "--allow-private-addresses"]
runner = CliRunner(env={"COLUMNS": "300"})


def crawl(
    tmp_path: Path, site: ThreadedDemoSite, *args: str, env: dict[str, str] | None = None
) -> tuple[Result, Path]:
    out = tmp_path / "orders.jsonl"
    command = [
        "crawl",
        site.url("shop", "/members/"),
        site.url("shop", "/staff/"),
        "--config",
        str(EXAMPLE / "crawl.toml"),
        "--parsers",
        str(EXAMPLE / "parsers.py"),
        "--state",
        str(tmp_path / "state"),
        "-o",
        str(out),
        *FAST,
        *args,
    ]
    return runner.invoke(app, command, env=env), out


def test_the_example_reads_every_order_logging_in_again_when_the_session_ends(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    result, out = crawl(tmp_path, site, "--secrets", str(EXAMPLE / "secrets.toml"))
    assert result.exit_code == 0, result.output
    records = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert records == [
        {
            "type": "order",
            "key": str(o.id),
            "date": o.date,
            "total": o.total,
            "lines": list(o.lines),
        }
        for o in ORDERS
    ] + [{"type": "staff_note", "key": "staff", "text": "Restock on Friday"}]
    requests = Counter((r.method, r.path.split("?")[0]) for r in site.log)
    member_pages = 1 + len(ORDERS)
    logins = requests[("POST", "/members/login")]
    assert logins == -(-member_pages // SESSION_PAGE_VIEWS)  # 9 pages, 4 per session: 3
    assert requests[("GET", "/members/login")] == logins  # the form, for its CSRF token
    member_gets = sum(
        n
        for (method, path), n in requests.items()
        if method == "GET" and path != "/members/login" and path.startswith("/members/")
    )
    # each login lands on /members/ (its redirect); a page that found the session over is
    # fetched again after the next login
    assert member_gets == member_pages + logins + (logins - 1)
    assert MEMBER_PASSWORD not in result.output
    assert STAFF_PASSWORD not in result.output


def test_credentials_from_the_environment_and_a_wrong_password(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    env = {
        "CRAWLFLEET_SECRET_127_0_0_2_USERNAME": "alice",
        "CRAWLFLEET_SECRET_127_0_0_2_PASSWORD": "not-the-password",
    }
    result, out = crawl(tmp_path, site, "--max-pages", "1", env=env)
    assert result.exit_code == 5, result.output  # a failed login is a shortfall (issue #37.1)
    login = [line for line in result.output.splitlines() if line.startswith("login failed")]
    assert len(login) == 1, result.output
    assert "the site refused the credentials" in login[0]
    assert "crawl again with --fresh" in login[0]
    assert "not-the-password" not in result.output
    assert out.read_bytes() == b""
    with_no_secrets, _ = crawl(tmp_path / "none", site)
    assert with_no_secrets.exit_code == 2
    assert with_no_secrets.output.startswith("error: login step 'members_login' needs secrets")
