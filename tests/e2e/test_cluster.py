"""Distributed crawls on a Redis Cluster frontier: partitions spread over the nodes, exact
results with two workers, and a primary's failover loses nothing."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable

import pytest
import redis
from redis.cluster import RedisCluster
from typer.testing import CliRunner

from crawlfleet.cli.main import app
from crawlfleet.demosite import ThreadedDemoSite, gaps_s
from crawlfleet.frontier.redis.routing import partition_prefix
from tests.e2e.conftest import (
    DELAY_S,
    FAST,
    ItemKeys,
    Workers,
    attempt_workers,
    dispatch,
    postgres_items,
)
from tests.fixtures.redis_cluster import LocalCluster

pytestmark = pytest.mark.redis
PARTITIONS = "6"


def page_paths(site: ThreadedDemoSite, role: str) -> list[str]:
    return [r.path for r in site.log if r.role == role and r.path != "/robots.txt"]


def cluster_done(cluster_url: str, crawl_id: str, partitions: int) -> int:
    """Requests done so far, summed over the crawl's partitions."""
    nodes = cluster_url.removeprefix("redis+cluster://").split(",")
    host, port = nodes[0].split(":")
    with RedisCluster(host=host, port=int(port)) as client:
        keys = [f"{partition_prefix(crawl_id, p)}:counts" for p in range(partitions)]
        return sum(int(client.hget(key, "done") or 0) for key in keys)


def primaries_holding(cluster_url: str, crawl_id: str, partitions: int) -> set[str]:
    nodes = cluster_url.removeprefix("redis+cluster://").split(",")
    host, port = nodes[0].split(":")
    with RedisCluster(host=host, port=int(port)) as client:
        return {
            client.get_node_from_key(f"{partition_prefix(crawl_id, p)}:counts").name
            for p in range(partitions)
        }


def test_two_workers_on_a_cluster_frontier_crawl_like_the_embedded_runtime(
    site: ThreadedDemoSite,
    redis_cluster_url: str,
    redis_url: str,
    postgres_dsn: str,
    workers: Workers,
    shop_quotes_items: ItemKeys,
) -> None:
    seeds = [site.url("shop"), site.url("quotes")]
    site.clear_log()
    for _ in range(2):
        workers.start(redis_cluster_url, postgres_dsn, extra=("--broker", redis_url))
    result = dispatch(
        *seeds,
        *("--redis", redis_cluster_url, "--postgres", postgres_dsn),
        *("--crawl-id", "cluster-two", "--partitions", PARTITIONS, *FAST),
        env={"CRAWLFLEET_BROKER_URL": redis_url},
    )
    assert result.returncode == 0, result.stdout
    assert postgres_items(postgres_dsn) == shop_quotes_items
    for role in ("shop", "quotes"):
        paths = page_paths(site, role)
        assert [p for p, n in Counter(paths).items() if n > 1] == []
        pages = [r for r in site.log if r.role == role and r.path != "/robots.txt"]
        assert min(gaps_s(pages, role)) >= DELAY_S
    assert len(attempt_workers(postgres_dsn)) == 2
    assert len(primaries_holding(redis_cluster_url, "cluster-two", int(PARTITIONS))) == 3

    status = CliRunner().invoke(
        app, ["status", "--redis", redis_cluster_url, "--crawl-id", "cluster-two"]
    )
    assert status.exit_code == 0, status.output
    assert "finished" in status.output
    done = cluster_done(redis_cluster_url, "cluster-two", int(PARTITIONS))
    assert f" {done} " in status.output
    target = ["--redis", redis_cluster_url, "--crawl-id", "cluster-two"]
    for command in (["dlq", "classes"], ["pause"], ["resume"]):
        ran = CliRunner().invoke(app, [*command, *target])
        assert ran.exit_code == 0, ran.output


def test_a_cluster_url_is_refused_as_the_celery_broker(
    redis_cluster_url: str, postgres_dsn: str, site: ThreadedDemoSite
) -> None:
    result = dispatch(
        site.url("shop"), "--redis", redis_cluster_url, "--postgres", postgres_dsn,
        "--crawl-id", "cluster-broker", *FAST,
    )  # fmt: skip
    assert result.returncode != 0
    assert "Celery's Redis transport cannot use a Redis Cluster" in result.stdout


def _fail_over_when(
    cluster: LocalCluster, crawl_id: str, at_done: int, failed_over: list[str]
) -> Callable[[], None]:
    """Once ``at_done`` pages are done: pause writes on the primary holding partition 0,
    wait until its replica has every write, SIGKILL the primary, and wait for the failover."""

    def run() -> None:
        deadline = time.monotonic() + 60
        while cluster_done(cluster.url, crawl_id, int(PARTITIONS)) < at_done:
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)
        seed = cluster.nodes[0]
        with RedisCluster(host="127.0.0.1", port=seed.port) as client:
            name = client.get_node_from_key(f"{partition_prefix(crawl_id, 0)}:counts").name
        victim = next(n for n in cluster.nodes if f"127.0.0.1:{n.port}" == name)
        with redis.Redis(port=victim.port) as primary:
            primary.execute_command("CLIENT", "PAUSE", "3000", "WRITE")
            offset = int(primary.info("replication")["master_repl_offset"])
            replica_port = int(primary.info("replication")["slave0"]["port"])
        with redis.Redis(port=replica_port) as replica:
            while int(replica.info("replication")["slave_repl_offset"]) < offset:
                time.sleep(0.01)
        victim.kill()
        survivor = next(n for n in cluster.nodes if n.port == replica_port)
        while cluster.role(survivor) != "master":
            time.sleep(0.1)
        failed_over.append(name)

    return run


@pytest.mark.slow
@pytest.mark.timeout(300)  # a failover under a loaded machine's scheduling
def test_a_primary_failover_mid_crawl_loses_nothing(
    site: ThreadedDemoSite,
    start_redis_cluster: Callable[..., LocalCluster],
    redis_url: str,
    postgres_dsn: str,
    workers: Workers,
    shop_quotes_items: ItemKeys,
) -> None:
    cluster = start_redis_cluster(primaries=3, replicas=1)
    seeds = [site.url("shop"), site.url("quotes")]
    for _ in range(2):
        workers.start(cluster.url, postgres_dsn, extra=("--broker", redis_url))
    failed_over: list[str] = []
    fault = threading.Thread(target=_fail_over_when(cluster, "failover", 15, failed_over))
    fault.start()
    result = dispatch(
        *seeds,
        *("--redis", cluster.url, "--postgres", postgres_dsn),
        *("--crawl-id", "failover", "--partitions", PARTITIONS, *FAST),
        # A lease end that outlasts the clients' retries comes back when its lease expires.
        env={"CRAWLFLEET_BROKER_URL": redis_url, "CRAWLFLEET_LEASE_S": "15"},
        timeout_s=240.0,
    )
    fault.join(timeout=90)
    assert failed_over, "the fault never ran"
    assert result.returncode == 0, result.stdout
    assert postgres_items(postgres_dsn) == shop_quotes_items
    status = CliRunner().invoke(app, ["status", "--redis", cluster.url, "--crawl-id", "failover"])
    assert status.exit_code == 0, status.output
    assert "finished" in status.output
