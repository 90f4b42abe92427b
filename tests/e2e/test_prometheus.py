"""Prometheus metrics against real parts: a real Prometheus (Debian's ``prometheus``) scraping
a distributed crawl of the demo site, the shipped alert rules evaluated by it, every Grafana
panel's PromQL run against it, and ``promtool`` on the shipped files and on real scrapes."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from crawlfleet import Crawl
from crawlfleet.cli.main import app
from crawlfleet.demosite import AccessRecord, ThreadedDemoSite
from crawlfleet.monitoring.metrics import Metrics
from crawlfleet.settings import Settings
from tests.e2e.conftest import FAST, Workers, start_dispatch

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
CRAWL = "prom"
LAB, QUOTES = "127.0.0.4", "127.0.0.3"
WAIT_S = 60.0


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} not found (scripts/bootstrap.sh --all installs Debian's prometheus)")
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return str(response.read().decode())


def wait_until(check: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def pages(log: list[AccessRecord], role: str | None = None) -> list[AccessRecord]:
    """Page requests the demo site saw (robots.txt left out), of one role or all."""
    return [r for r in log if r.path != "/robots.txt" and (role is None or r.role == role)]


@dataclass
class Prometheus:
    """A private Prometheus on a loopback port with its own data directory."""

    url: str
    process: subprocess.Popen[bytes]

    @classmethod
    def start(cls, binary: str, config: Path, data: Path, port: int, log: Path) -> Prometheus:
        with log.open("ab") as out:
            process = subprocess.Popen(
                [
                    binary,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={data}",
                    f"--web.listen-address=127.0.0.1:{port}",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        server = cls(f"http://127.0.0.1:{port}", process)
        wait_until(server.ready, f"Prometheus ready ({log.read_text()[-2000:]})", 30.0)
        return server

    def ready(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"prometheus exited {self.process.returncode}")
        try:
            return "Ready" in get(f"{self.url}/-/ready")
        except OSError:
            return False

    def api(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        reply = json.loads(get(f"{self.url}/api/v1/{path}?{query}"))
        assert reply["status"] == "success", reply
        return reply["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        params = {"query": expr} if at is None else {"query": expr, "time": f"{at:.3f}"}
        return list(self.api("query", **params)["result"])

    def value(self, expr: str, at: float | None = None) -> float | None:
        result = self.query(expr, at)
        return float(result[0]["value"][1]) if result else None

    def firing(self, alert: str) -> list[dict[str, Any]]:
        alerts = self.api("alerts")["alerts"]
        return [a for a in alerts if a["labels"]["alertname"] == alert and a["state"] == "firing"]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def scrape_config(tmp_path: Path, *, crawl: int, worker: int, dashboard: int) -> Path:
    """The shipped scrape config and rules, with 1 s intervals, these ports and no ``for``."""
    rules = tmp_path / "alerts.yml"
    rules.write_text(re.sub(r"for: \S+", "for: 0s", (DEPLOY / "prometheus/alerts.yml").read_text()))
    text = (DEPLOY / "prometheus/prometheus.yml").read_text()
    for old, new in [
        ("15s", "1s"),
        ("- alerts.yml", f"- {rules}"),
        ("127.0.0.1:9410", f"127.0.0.1:{crawl}"),
        ('"127.0.0.1:9411", "127.0.0.1:9412"', f'"127.0.0.1:{worker}"'),
        ("127.0.0.1:8080", f"127.0.0.1:{dashboard}"),
    ]:
        assert old in text, old
        text = text.replace(old, new)
    config = tmp_path / "prometheus.yml"
    config.write_text(text)
    return config


def panel_queries() -> list[tuple[str, str]]:
    """(panel title, PromQL) of every target of the shipped Grafana dashboard."""
    dashboard = json.loads((DEPLOY / "grafana/crawlfleet.json").read_text())
    found = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            found.append((panel["title"], target["expr"]))
    return found


def doc_queries() -> list[str]:
    """The PromQL blocks of docs/metrics.md."""
    text = (ROOT / "docs/metrics.md").read_text()
    return re.findall(r"```promql\n(.*?)```", text, flags=re.DOTALL)


@pytest.fixture
def prometheus_bin() -> str:
    tool("promtool")
    return tool("prometheus")


def test_promtool_accepts_the_shipped_rules_and_config() -> None:
    promtool = tool("promtool")
    rules = subprocess.run(
        [promtool, "check", "rules", str(DEPLOY / "prometheus/alerts.yml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert rules.returncode == 0, rules.stdout + rules.stderr
    assert "SUCCESS: 5 rules found" in rules.stdout
    config = subprocess.run(
        [promtool, "check", "config", str(DEPLOY / "prometheus/prometheus.yml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert config.returncode == 0, config.stdout + config.stderr


DRIFT_RULE_TEST = """
rule_files: [{rules}]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'crawlfleet_parser_drift{{crawl="c",domain="a.test",parser="item",instance="x",job="j"}}'
        values: '0 0 1 1 1'
      - series: 'crawlfleet_parser_drift{{crawl="c",domain="b.test",parser="item",instance="x",job="j"}}'
        values: '0 0 0 0 0'
    alert_rule_test:
      - eval_time: 2m
        alertname: CrawlfleetParserDrift
        exp_alerts: []
      - eval_time: 4m
        alertname: CrawlfleetParserDrift
        exp_alerts:
          - exp_labels: {{crawl: c, domain: a.test, parser: item, severity: warning}}
            exp_annotations:
              summary: "crawl c: parser item drifted on a.test"
              description: {description}
"""


def test_the_drift_alert_fires_for_the_drifted_parser_and_domain_only(tmp_path: Path) -> None:
    tests = tmp_path / "drift_test.yml"
    description = (
        "Its pages stopped meeting the parser's expectations (the site changed). With on_drift "
        '= "pause" its pages there are not fetched: fix the parser (samples in '
        "<state>/mismatch/), then `crawlfleet resume-parser PARSER DOMAIN`."
    )
    text = DRIFT_RULE_TEST.format(
        rules=DEPLOY / "prometheus/alerts.yml", description=json.dumps(description)
    )
    tests.write_text(text)
    run = subprocess.run(
        [tool("promtool"), "test", "rules", str(tests)], capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stdout + run.stderr


def promtool_check_metrics(text: str) -> None:
    checked = subprocess.run(
        [tool("promtool"), "check", "metrics"],
        input=text,
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout + checked.stderr == ""  # no lint problem either


async def test_pages_fetched_sum_to_the_requests_the_server_saw(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    """Embedded crawl: ``crawlfleet_pages_fetched_total`` over its labels = page requests."""
    metrics = Metrics()
    server = metrics.serve(0)
    try:
        settings = Settings(
            state_dir=tmp_path / "state", allow_private_addresses=True, delay_s=0, max_retries=0
        )
        seeds = [site.url("quotes"), site.url("lab", "/status/500"), site.url("lab", "/page/9")]
        result = await Crawl(settings, seeds=seeds, metrics=metrics).run_async()
        text = get(server.url)
    finally:
        server.close()
    fetched = [
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("crawlfleet_pages_fetched_total{")
    ]
    assert sum(fetched) == len(pages(site.log)) == result.stats.fetched
    assert f'crawlfleet_dead_letters{{crawl="default"}} {float(result.counts.dead)}' in text
    promtool_check_metrics(text)


def test_a_taken_metrics_port_is_a_one_line_error(site: ThreadedDemoSite, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(
            app,
            [
                "crawl",
                site.url("quotes"),
                "--state",
                str(tmp_path / "state"),
                *FAST,
                "--metrics-port",
                str(port),
            ],
        )
    assert result.exit_code == 2, result.output
    assert f"error: cannot serve metrics on 127.0.0.1:{port}" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert pages(site.log) == []


@pytest.fixture
def prometheus_crawl(
    site: ThreadedDemoSite,
    redis_url: str,
    postgres_dsn: str,
    workers: Workers,
    prometheus_bin: str,
    tmp_path: Path,
) -> Iterator[tuple[Prometheus, dict[str, str], subprocess.Popen[bytes]]]:
    """A distributed crawl (dispatcher and one worker serving /metrics) scraped by Prometheus.

    The lab host gets 200 pages and 40 URLs answering 500 (max_retries 0: dead letters);
    quotes is kept slow (5 s apart) so the crawl outlives the lab's last figures.
    """
    ports = {name: free_port() for name in ("crawl", "worker", "dashboard", "prometheus")}
    workers.start(
        redis_url, postgres_dsn, concurrency=4, extra=("--metrics-port", str(ports["worker"]))
    )
    config = scrape_config(
        tmp_path, crawl=ports["crawl"], worker=ports["worker"], dashboard=ports["dashboard"]
    )
    prometheus = Prometheus.start(
        prometheus_bin, config, tmp_path / "tsdb", ports["prometheus"], tmp_path / "prom.log"
    )
    crawl_config = tmp_path / "crawl.toml"
    crawl_config.write_text(
        f'[crawl]\nmax_retries = 0\nmax_depth = 0\n[crawl.domains."{QUOTES}"]\ndelay_s = 5.0\n'
    )
    seeds = []
    for n in range(1, 201):
        seeds.append(site.url("lab", f"/blocks/page/{n}"))
        if n % 5 == 0:
            seeds.append(site.url("lab", f"/status/500?burst={n}"))
    seeds += [site.url("quotes", f"/page/{n}/") for n in range(1, 6)]
    urls = {
        "crawl": f"http://127.0.0.1:{ports['crawl']}/metrics",
        "worker": f"http://127.0.0.1:{ports['worker']}/metrics",
    }
    dispatcher = start_dispatch(
        *seeds,
        "--redis",
        redis_url,
        "--postgres",
        postgres_dsn,
        "--crawl-id",
        CRAWL,
        "--fresh",
        "--config",
        str(crawl_config),
        *FAST,
        "--metrics-port",
        str(ports["crawl"]),
        log_path=tmp_path / "dispatch.log",
        env={**os.environ},
    )
    try:
        yield prometheus, urls, dispatcher
    finally:
        if dispatcher.poll() is None:
            dispatcher.send_signal(signal.SIGTERM)
            dispatcher.wait(timeout=60)
        prometheus.stop()


@pytest.mark.slow
@pytest.mark.redis
@pytest.mark.postgres
def test_prometheus_scrapes_a_distributed_crawl_alerts_and_serves_every_panel(
    site: ThreadedDemoSite,
    prometheus_crawl: tuple[Prometheus, dict[str, str], subprocess.Popen[bytes]],
) -> None:
    prometheus, urls, dispatcher = prometheus_crawl
    lab_fetched = (
        f'sum(max without (instance, job) (crawlfleet_pages_fetched_total{{crawl="{CRAWL}",'
        f'domain="{LAB}"}}))'
    )
    wait_until(lambda: len(pages(site.log, "lab")) == 240, "the lab's 240 requests")
    wait_until(lambda: prometheus.value(lab_fetched) == 240.0, "the lab's figures scraped")
    assert dispatcher.poll() is None, "the crawl must outlive the lab (quotes is slow)"
    at = time.time()
    lab = pages(site.log, "lab")

    # The pages rate Prometheus computes matches the server's log over the same 5 s.
    start, end = min(r.wall_s for r in lab), max(r.wall_s for r in lab)
    assert end - start > 7.0, "the lab must be crawled long enough to measure a rate"
    window_end = (start + end) / 2 + 2.5
    rate = prometheus.value(
        f'sum(max without (instance, job) (rate(crawlfleet_pages_fetched_total{{crawl="{CRAWL}"}}'
        "[5s])))",
        at=window_end,
    )
    lag_s = 0.5  # a snapshot is refreshed every 0.5 s, and scraped every second
    seen = [r for r in pages(site.log) if window_end - 5 - lag_s < r.wall_s <= window_end - lag_s]
    assert rate is not None
    assert rate == pytest.approx(len(seen) / 5.0, rel=0.3)

    # The lab's success rate (docs/metrics.md) against the log: 200 pages of 240 answered 200.
    ok_in_log = sum(r.status == 200 for r in lab) / len(lab)
    assert ok_in_log == pytest.approx(200 / 240)
    success = prometheus.query(
        f'sum by (domain) (max without (instance, job) (rate(crawlfleet_attempts_total{{crawl="{CRAWL}",'
        f'outcome="ok"}}[1m]))) / sum by (domain) (max without (instance, job) '
        f'(rate(crawlfleet_attempts_total{{crawl="{CRAWL}",outcome!="skipped"}}[1m])))'
    )
    by_domain = {r["metric"]["domain"]: float(r["value"][1]) for r in success}
    assert by_domain[LAB] == pytest.approx(ok_in_log, abs=0.05)
    outcomes = prometheus.query(
        f'sum by (outcome) (max without (instance, job) (crawlfleet_attempts_total{{crawl="{CRAWL}",'
        f'domain="{LAB}"}}))'
    )
    counted = {r["metric"]["outcome"]: float(r["value"][1]) for r in outcomes}
    assert counted["ok"] == sum(r.status == 200 for r in lab)
    assert counted["dead"] == sum(r.status == 500 for r in lab) == 40

    # The burst of dead letters fires the shipped DLQ alert, evaluated by this Prometheus.
    wait_until(
        lambda: bool(prometheus.firing("CrawlfleetDeadLettersGrowing")), "the DLQ alert", 30.0
    )
    assert prometheus.firing("CrawlfleetDeadLettersGrowing")[0]["labels"]["crawl"] == CRAWL

    # Real scrapes pass promtool's checks.
    promtool_check_metrics(get(urls["crawl"]))
    promtool_check_metrics(get(urls["worker"]))

    # Every Grafana panel's PromQL, and every key metric in the docs, returns data.
    queries = [(title, expr.replace("$__rate_interval", "30s")) for title, expr in panel_queries()]
    queries += [("docs/metrics.md", expr.replace("[5m]", "[30s]")) for expr in doc_queries()]
    assert len(queries) > 25
    empty = []
    for title, expr in queries:
        promql = expr.replace("$crawl", CRAWL)
        if not prometheus.query(promql, at=at):
            empty.append(f"{title}: {promql}")
    assert empty == []
