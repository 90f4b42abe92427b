"""The crawl's own processors, sinks (entry points) and request/response hooks, in a real crawl."""

from __future__ import annotations

import textwrap
from pathlib import Path

import orjson
import pytest

from crawlfleet.api import Crawl
from crawlfleet.demosite import ThreadedDemoSite
from crawlfleet.errors import ConfigError
from crawlfleet.fetchers.hooks import load_hooks
from crawlfleet.pipeline.custom import SinkOptions, load_processors, load_sinks
from crawlfleet.settings import Settings

STEPS = """
import json
from dataclasses import replace

from crawlfleet.errors import DropItem
from crawlfleet.fetchers.hooks import Dropped, Hook

ORDER = []


def shout(item):
    return replace(item, data={**item.data, "title": item.data["title"].upper()})


def mark(item):
    if "Anselm" in item.data["title"]:
        raise DropItem("not this author")
    return replace(item, data={**item.data, "title": item.data["title"] + " x"})


class Sign(Hook):
    async def request(self, request):
        ORDER.append("sign")
        return replace(request, url=request.url + "?sig=ok" if request.url.endswith("/2/") else request.url)


class NoPageTwo(Hook):
    async def request(self, request):
        ORDER.append("drop")
        return request

    async def response(self, request, result):
        if "sig=ok" in request.url:
            raise Dropped("page two is not wanted")
        return result


class FileSink:
    def __init__(self, path):
        self.path = path

    async def write(self, items):
        with open(self.path, "a") as handle:
            for item in items:
                handle.write(json.dumps(item.data["title"]) + "\\n")

    async def close(self):
        with open(self.path, "a") as handle:
            handle.write("closed\\n")


def make_sink(options):
    return FileSink(options.state_dir / "extra.txt")
"""


@pytest.fixture
def steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    package = tmp_path / "code"
    package.mkdir()
    (package / "mysteps.py").write_text(STEPS)
    dist = package / "mysteps-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mysteps\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[crawlfleet.sinks]\nlines = mysteps:make_sink\n")
    monkeypatch.syspath_prepend(str(package))
    return package


def settings(tmp_path: Path, **extra: object) -> Settings:
    return Settings(
        state_dir=tmp_path / "state",
        allow_private_addresses=True,
        delay_s=0,
        max_pages=40,
        max_depth=1,
        **extra,
    )


@pytest.mark.usefixtures("steps")
async def test_processors_sinks_and_hooks_run_in_their_order(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    import mysteps  # type: ignore[import-not-found]

    out = tmp_path / "items.jsonl"
    crawl = Crawl(
        settings(
            tmp_path,
            processors=["mysteps:mark", "mysteps:shout"],
            sinks=["lines"],
            hooks=["mysteps:Sign", "mysteps:NoPageTwo"],
            output=out,
        ),
        seeds=[site.url("quotes", "/page/1/")],
    )
    result = await crawl.run_async()
    assert any(r.path == "/page/2/?sig=ok" for r in site.log), [r.path for r in site.log]
    assert result.counts.dead == 0  # the hook's refusal is no fault: skipped, not dead-lettered
    assert result.stats.get("outcome.skipped") == 1
    titles = [orjson.loads(line)["title"] for line in out.read_bytes().splitlines()]
    assert "QUOTES, PAGE 1 | QUOTES X" in titles
    assert all(title == title.upper() and title.endswith(" X") for title in titles)
    assert not [title for title in titles if "ANSELM" in title]
    assert not [title for title in titles if "PAGE 2" in title]
    assert len(titles) == result.counts.done - 2  # page two skipped as well now
    extra = (tmp_path / "state" / "extra.txt").read_text().splitlines()
    assert extra[-1] == "closed"
    assert sorted(orjson.loads(line) for line in extra[:-1]) == sorted(titles)
    assert mysteps.ORDER[:2] == ["sign", "drop"]


@pytest.mark.usefixtures("steps")
def test_bad_references_are_config_errors_naming_them(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"processors: 'mysteps' has no 'nothing'"):
        load_processors(["mysteps:nothing"])
    with pytest.raises(ConfigError, match=r"processors: cannot import 'nosuchmodule'"):
        load_processors(["nosuchmodule:f"])
    with pytest.raises(ConfigError, match=r"processors: 'mysteps' is not 'module:name'"):
        load_processors(["mysteps"])
    with pytest.raises(ConfigError, match=r"processors: 'mysteps:ORDER' is not callable"):
        load_processors(["mysteps:ORDER"])
    with pytest.raises(ConfigError, match=r"hooks: 'mysteps:shout' has no async request"):
        load_hooks(["mysteps:shout"])
    with pytest.raises(ConfigError, match=r"sinks: no 'crawlfleet.sinks' entry point 'nope'"):
        load_sinks(["nope"], SinkOptions("default", tmp_path / "state"))


def test_a_processor_file_path_reference(tmp_path: Path) -> None:
    path = tmp_path / "steps.py"
    path.write_text(textwrap.dedent("def keep(item):\n    return item\n"))
    [processor] = load_processors([f"{path}:keep"])
    assert processor.__name__ == "keep"  # type: ignore[attr-defined]
