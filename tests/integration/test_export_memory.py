"""``crawlfleet export`` streams: its peak memory does not grow with the number of items.

Each format is exported from a file of 1,000 items and from one of 50,000 (the same fields,
~300 bytes of JSON each: 15 MB of data) by the real command in its own process; the peak
resident set of the second may exceed the first's by ``GROWTH_BOUND_BYTES`` at most.
Measured: +0 MB for JSONL, +8 MB for Parquet (pyarrow's pool and row-group metadata); a JSONL
export that fetched all its rows first grew by 26 MB and failed.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path

import orjson
import pytest

from crawlfleet.pipeline.sinks.sqlite_schema import prepare
from tests.fixtures.cli import CRAWLFLEET, SRC

SMALL, LARGE = 1_000, 50_000
GROWTH_BOUND_BYTES = 16_000_000


def product(n: int) -> dict[str, object]:
    return {
        "id": n,
        "name": f"Polished copper kettle {n}",
        "price": n / 100,
        "tags": ["kitchen", "copper"],
        "url": f"http://shop.test/p/{n}.html",
        "description": "quiet rustic timber " * 10,
    }


def items_file(path: Path, count: int) -> Path:
    """A state directory whose items file (the crawl's schema) holds ``count`` products."""
    path.mkdir(parents=True)
    db = sqlite3.connect(path / "items.sqlite", isolation_level=None)
    prepare(db, path / "items.sqlite", "default")
    db.execute("BEGIN")
    db.executemany(
        "INSERT INTO items VALUES ('default', 'product', ?, ?, ?, 1.0, 1.0, 1.0, 1.0)",
        (
            (
                f"{n:08d}",
                orjson.dumps(product(n)).decode(),
                f"{n:032x}",
            )
            for n in range(count)
        ),
    )
    db.execute("COMMIT")
    db.close()
    return path


def peak_rss_bytes(state: Path, out: Path) -> int:
    """Runs ``crawlfleet export`` and returns its peak resident set (``wait4``)."""
    env = {**os.environ, "PYTHONPATH": SRC}
    argv = [CRAWLFLEET, "export", "--state", str(state), "-o", str(out)]
    process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    stderr = process.stderr.read() if process.stderr is not None else b""
    process.communicate()
    assert process.returncode == 0, stderr
    return usage.ru_maxrss * 1024  # Linux reports KiB


@pytest.fixture(scope="module")
def states(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("export-memory")
    return items_file(root / "small", SMALL), items_file(root / "large", LARGE)


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_export_memory_does_not_grow_with_the_items(
    states: tuple[Path, Path], tmp_path: Path, suffix: str
) -> None:
    small, large = states
    small_rss = peak_rss_bytes(small, tmp_path / f"small{suffix}")
    large_rss = peak_rss_bytes(large, tmp_path / f"large{suffix}")
    grown = large_rss - small_rss
    assert grown <= GROWTH_BOUND_BYTES, f"{suffix}: {grown / 1e6:.1f} MB more for {LARGE} items"
    if suffix == ".jsonl":
        assert (tmp_path / "large.jsonl").read_bytes().count(b"\n") == LARGE
