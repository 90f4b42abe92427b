"""Shared fixtures: the local test site and private Redis / PostgreSQL servers."""

pytest_plugins = [
    "tests.fixtures.testsite",
    "tests.fixtures.redis_server",
    "tests.fixtures.redis_cluster",
    "tests.fixtures.postgres_server",
    "tests.fixtures.tinyproxy",
    "tests.fixtures.tls",
]
