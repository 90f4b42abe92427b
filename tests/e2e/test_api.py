"""The Python API and the embedded run's statistics: the README example against the demo site,
``stats.json``, parse errors in the exit code."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import orjson
from typer.testing import CliRunner

import crawlfleet
from crawlfleet.cli.main import app
from crawlfleet.demosite import ThreadedDemoSite

README = Path(__file__).parents[2] / "README.md"
runner = CliRunner(env={"COLUMNS": "300"})
BROKEN = """
from crawlfleet import parser


@parser("127.0.0.3", pattern="/page/*")
def broken(response):
    raise KeyError("price")
"""


def readme_example() -> str:
    text = README.read_text()
    start = text.index("<!-- readme-checked-by: tests/e2e/test_api.py -->")
    return text[start:].split("```python\n", 1)[1].split("```", 1)[0]


def test_the_readme_example_runs_against_the_demo_site(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    code = readme_example().replace(":8800", f":{site.port}")
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    served = [r for r in site.log if r.role == "quotes" and r.path != "/robots.txt"]
    assert f"{len(served)} responses" in done.stdout
    assert (tmp_path / ".crawlfleet" / "api" / "stats.json").exists()


async def test_run_async_returns_the_store_counters(site: ThreadedDemoSite, tmp_path: Path) -> None:
    settings = crawlfleet.load_settings(
        seeds=[site.url("quotes")],
        allow_private_addresses=True,
        delay_s=0,
        max_pages=5,
        state_dir=tmp_path / "state",
    )
    samples: list[crawlfleet.Sample] = []
    result = await crawlfleet.Crawl(settings, on_progress=samples.append).run_async()
    assert result.complete
    assert result.exit_code() == 0
    assert result.stats.fetched == 5
    assert result.stats.items("stored")["page"] == 5
    assert samples
    assert samples[-1].counts.done == 5


def test_stats_json_has_the_summary_figures_and_parse_errors_exit_3(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    module = tmp_path / "broken.py"
    module.write_text(BROKEN)
    state = tmp_path / "state"
    args = ["crawl", site.url("quotes"), "--state", str(state), "--parsers", str(module)]
    args += ["--allow-private-addresses", "--delay", "0", "--max-pages", "6"]
    result = runner.invoke(app, args)
    assert result.exit_code == 3, result.output
    stats = orjson.loads((state / "stats.json").read_bytes())
    errors = stats["totals"]["outcome.parse_error"]
    assert f"error: {errors} pages failed to parse (--max-parse-errors 0)" in result.output
    assert f"{errors}x parser 'broken': KeyError: 'price'" in result.output
    fetched = int(re.findall(r"fetched (\d+) responses", result.output)[-1])
    assert stats["totals"]["fetched"] == fetched == 6
    assert stats["domains"]["127.0.0.3"]["fetched"] == 6
    assert stats["top_parse_errors"] == [
        {"error": "parser 'broken': KeyError: 'price'", "count": errors}
    ]
    again = runner.invoke(app, [*args, "--fresh", "--max-parse-errors", str(errors)])
    assert again.exit_code == 0, again.output
