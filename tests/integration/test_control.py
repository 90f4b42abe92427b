"""Pause, resume and cancel: the state in the crawl's Redis key or its state directory."""

from __future__ import annotations

from pathlib import Path

import pytest
from redis.asyncio import Redis

from crawlfleet.errors import ConfigError, StateError
from crawlfleet.frontier.redis.keys import hash_tag
from crawlfleet.ops.target import cancel, is_paused, run_state, set_paused
from crawlfleet.runtime.celery.definition import ACTIVE_CRAWLS, CrawlDefinition, definition_key
from crawlfleet.runtime.control import PAUSE_FILE, RunState, control_key
from crawlfleet.settings import Settings


async def test_an_embedded_crawl_is_paused_by_a_file_in_its_state_dir(tmp_path: Path) -> None:
    (tmp_path / "state.sqlite").touch()
    settings = Settings(state_dir=tmp_path)
    assert not await is_paused(settings)
    await set_paused(settings, True)
    assert (tmp_path / PAUSE_FILE).exists()
    assert await run_state(settings) is RunState.PAUSED
    await set_paused(settings, False)
    await set_paused(settings, False)
    assert not await is_paused(settings)


async def test_pausing_a_directory_without_a_crawl_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(StateError, match="no crawl state"):
        await set_paused(Settings(state_dir=tmp_path), True)
    with pytest.raises(ConfigError, match="distributed"):
        await cancel(Settings(state_dir=tmp_path))
    assert not (tmp_path / PAUSE_FILE).exists()


@pytest.mark.redis
async def test_a_distributed_crawl_is_paused_resumed_and_cancelled_in_its_key(
    redis_url: str,
) -> None:
    settings = Settings(redis_url=redis_url, crawl_id="ctl-1")
    client = Redis.from_url(redis_url, decode_responses=True)
    try:
        with pytest.raises(StateError, match="no crawl 'ctl-1'"):
            await set_paused(settings, True)
        definition = CrawlDefinition(settings, ("http://a.test/",), "run")
        await client.set(definition_key("ctl-1"), definition.to_json())
        await client.sadd(ACTIVE_CRAWLS, "ctl-1")
        assert await run_state(settings) is RunState.RUNNING
        await set_paused(settings, True)
        assert await client.get(control_key("ctl-1")) == "paused"
        assert hash_tag(control_key("ctl-1")) == "ctl-1"
        assert await is_paused(settings)
        await set_paused(settings, False)
        assert await run_state(settings) is RunState.RUNNING
        await cancel(settings)
        assert await run_state(settings) is RunState.CANCELLED
        assert not await client.sismember(ACTIVE_CRAWLS, "ctl-1")
        with pytest.raises(StateError, match="cancelled"):
            await set_paused(settings, False)
    finally:
        await client.aclose()


async def test_an_unreachable_redis_is_a_one_line_state_error() -> None:
    settings = Settings(redis_url="redis://127.0.0.1:1/0", crawl_id="x")
    with pytest.raises(StateError, match=r"^Redis at redis://127\.0\.0\.1:1/0: [^\n]+$"):
        await run_state(settings)
