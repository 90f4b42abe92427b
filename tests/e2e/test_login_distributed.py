"""``examples/login`` distributed: a real worker logs in, the session lives in Redis."""

from __future__ import annotations

import psycopg
import pytest
import redis

from crawlfleet.demosite import ThreadedDemoSite
from crawlfleet.demosite.members import MEMBER_PASSWORD, ORDERS, STAFF_PASSWORD
from crawlfleet.secretsfile import env_name
from tests.e2e.conftest import Workers, dispatch
from tests.e2e.test_login_example import EXAMPLE

pytestmark = [pytest.mark.redis, pytest.mark.postgres]
DOMAIN = "127.0.0.2"


@pytest.mark.slow
def test_the_login_example_distributed_reads_every_order_with_the_session_in_redis(
    site: ThreadedDemoSite, redis_url: str, postgres_dsn: str, workers: Workers
) -> None:
    secrets = {
        env_name(DOMAIN, "username"): "alice",
        env_name(DOMAIN, "password"): MEMBER_PASSWORD,
        env_name(DOMAIN, "basic_username"): "staff",
        env_name(DOMAIN, "basic_password"): STAFF_PASSWORD,
    }
    parsers = str(EXAMPLE / "parsers.py")
    workers.start(redis_url, postgres_dsn, extra=("--parsers", parsers), env=secrets)
    result = dispatch(
        site.url("shop", "/members/"),
        site.url("shop", "/staff/"),
        "--config",
        str(EXAMPLE / "crawl.toml"),
        "--parsers",
        parsers,
        "--redis",
        redis_url,
        "--postgres",
        postgres_dsn,
        "--crawl-id",
        "login",
        "--delay",
        "0",
        "--allow-private-addresses",
        env=secrets,
    )
    assert result.returncode == 0, result.stdout
    with psycopg.connect(postgres_dsn) as conn:
        rows = conn.execute("SELECT item_type, item_key, data FROM items").fetchall()
    items = {(t, k): data for t, k, data in rows}
    expected = {
        ("order", str(o.id)): {"date": o.date, "total": o.total, "lines": list(o.lines)}
        for o in ORDERS
    } | {("staff_note", "staff"): {"text": "Restock on Friday"}}
    assert items.keys() == expected.keys()
    for key, fields in expected.items():
        assert {name: items[key].get(name) for name in fields} == fields, items[key]
    with redis.Redis.from_url(redis_url) as client:
        assert client.hkeys("crawlfleet:{login}:sessions") == [DOMAIN.encode()]
    assert MEMBER_PASSWORD not in result.stdout
    assert STAFF_PASSWORD not in result.stdout
