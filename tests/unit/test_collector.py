"""The CLI's crawling commands raise the youngest GC generation's threshold (decision 0026)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from crawlfleet.cli.collector import YOUNGEST_THRESHOLD, tune_collector
from crawlfleet.cli.main import app


@pytest.fixture
def thresholds() -> Iterator[tuple[int, int, int]]:
    """The process's thresholds at the default youngest one, and put back after the test."""
    before = gc.get_threshold()
    gc.set_threshold(700, *before[1:])
    yield gc.get_threshold()
    gc.set_threshold(*before)


def test_tune_collector_raises_only_the_youngest_threshold(
    thresholds: tuple[int, int, int],
) -> None:
    tune_collector()
    assert gc.get_threshold() == (YOUNGEST_THRESHOLD, *thresholds[1:])


def test_the_crawl_command_tunes_the_collector(
    thresholds: tuple[int, int, int], tmp_path: Path
) -> None:
    # The crawl starts, finds no valid seed and exits 2: after the collector was set.
    result = CliRunner().invoke(app, ["crawl", "not a url", "--state", str(tmp_path / "s")])
    assert result.exit_code == 2, result.output
    assert gc.get_threshold()[0] == YOUNGEST_THRESHOLD
