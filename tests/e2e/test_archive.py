"""``--archive DIR``: every response a crawl fetched is in WARC/1.1 files that an independent
reader (warcio) reads back, with the bytes the server sent; a recrawl's unchanged pages are
``revisit`` records."""

from __future__ import annotations

import base64
import gzip
import os
import time
import urllib.request
from collections import Counter
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner
from warcio.archiveiterator import ArchiveIterator

from crawlfleet.archive.index import INDEX_FILE, SqliteCaptureIndex
from crawlfleet.cli.main import app
from crawlfleet.demosite import ThreadedDemoSite
from crawlfleet.demosite.jsapp import JS_ITEMS, item_name
from crawlfleet.demosite.picky import PICKY_PAGES
from tests.e2e.conftest import PICKY_LADDER

runner = CliRunner(env={"COLUMNS": "300"})
FAST = ["--allow-private-addresses", "--delay", "0", "--concurrency", "8"]


def crawl(state: Path, *args: str) -> str:
    result = runner.invoke(app, ["crawl", "--state", str(state), *args, *FAST])
    assert result.exit_code == 0, result.output
    return result.output


def records(archive: Path) -> list[tuple[str, dict[str, str], int | None, bytes]]:
    """Every record of every file: type, WARC headers, HTTP status, payload (digests checked)."""
    found = []
    files = sorted(archive.rglob("*.warc.gz"))
    assert files
    for path in files:
        with path.open("rb") as handle:
            for record in ArchiveIterator(handle, check_digests="raise"):
                assert record.rec_headers.protocol == "WARC/1.1"
                status = (
                    int(record.http_headers.get_statuscode())
                    if record.http_headers and record.rec_type != "request"
                    else None
                )
                headers = dict(record.rec_headers.headers)
                found.append((record.rec_type, headers, status, record.content_stream().read()))
    return found


def sent_by(url: str, headers: dict[str, str] | None = None) -> bytes:
    """The body the server sends for ``url`` (no redirect followed, no decoding)."""

    class Keep(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: object, **kwargs: object) -> None:
            return None

    opener = urllib.request.build_opener(Keep)
    try:
        with opener.open(urllib.request.Request(url, headers=headers or {})) as response:
            return bytes(response.read())
    except urllib.error.HTTPError as exc:
        return bytes(exc.read())


def test_every_response_is_archived_with_the_bytes_the_server_sent(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    archive = tmp_path / "warc"
    crawl(tmp_path / "state", site.url("lab"), "--archive", str(archive))
    fetched = Counter(record.path for record in site.log)
    found = records(archive)
    kinds = Counter(kind for kind, *_ in found)
    responses = [
        (h["WARC-Target-URI"], status, body)
        for kind, h, status, body in found
        if kind == "response"
    ]
    assert kinds["warcinfo"] == len(list(archive.rglob("*.warc.gz")))
    assert kinds["request"] == kinds["response"] == len(responses) == sum(fetched.values())
    statuses = Counter(status for _, status, _ in responses)
    assert statuses[200] > 5
    assert statuses[404] == 1
    assert statuses[301] + statuses[302] >= 1
    urls = {url for url, _, _ in responses}
    assert site.url("lab", "/robots.txt") in urls
    for url, _, body in responses:
        assert body == sent_by(url), url
    for kind, headers, *_ in found:
        if kind in ("request", "response"):
            assert headers["X-Crawlfleet-Crawl-Id"] == "default"
            assert headers["WARC-Date"].endswith("Z")
            assert headers["WARC-IP-Address"] == "127.0.0.4"  # the lab host's address


def gzip_member_of(state: Path, archive: Path, url: str) -> bytes:
    """The gzip member of ``url``'s one capture, as the index of the crawl at ``state`` places
    it in ``archive``."""
    index = SqliteCaptureIndex.existing(state / INDEX_FILE)
    [capture] = index.find(url)
    index.close()
    with (archive / capture.file).open("rb") as handle:
        handle.seek(capture.offset)
        return handle.read(capture.length)


def test_a_content_coded_page_is_kept_as_sent_and_read_back_decoded(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    archive = tmp_path / "warc"
    seed = site.url("lab", "/nested?depth=3")
    crawl(tmp_path / "state", seed, "--archive", str(archive), "--max-depth", "0")
    [path] = archive.rglob("*.warc.gz")
    with path.open("rb") as handle:
        for record in ArchiveIterator(handle, check_digests="raise"):
            if record.rec_type == "response" and record.rec_headers["WARC-Target-URI"] == seed:
                assert record.http_headers["Content-Encoding"] == "gzip"
                assert record.raw_stream.read() == sent_by(seed)
                break
        else:
            raise AssertionError(f"no response record for {seed}")
    with path.open("rb") as handle:
        decoded = [
            r.content_stream().read()
            for r in ArchiveIterator(handle)
            if r.rec_type == "response" and r.rec_headers["WARC-Target-URI"] == seed
        ]
    assert b"<div><div><div>" in decoded[0]
    member = gzip_member_of(tmp_path / "state", archive, seed)
    assert member[10] >> 1 & 3 == 0  # compressed by the server: stored, not deflated again
    assert gzip.decompress(member).count(sent_by(seed)) == 1


def test_a_plain_page_is_deflated_in_the_archive(site: ThreadedDemoSite, tmp_path: Path) -> None:
    archive, seed = tmp_path / "warc", site.url("lab", "/page/1")
    crawl(tmp_path / "state", seed, "--archive", str(archive), "--max-depth", "0")
    member = gzip_member_of(tmp_path / "state", archive, seed)
    assert member[10] >> 1 & 3 != 0
    assert len(member) < len(gzip.decompress(member))


def test_a_recrawl_writes_unchanged_pages_as_revisits(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    archive = tmp_path / "warc"
    state = tmp_path / "state"
    crawl(state, site.url("lab"), "--archive", str(archive))
    first = records(archive)
    crawl(state, site.url("lab"), "--archive", str(archive), "--fresh")
    both = records(archive)
    again = both[len(first) :]
    earlier = {
        h["WARC-Target-URI"]: h
        for kind, h, status, _ in first
        if kind == "response" and status == 200
    }
    revisits = [(h, body) for kind, h, _, body in again if kind == "revisit"]
    assert len(revisits) == len(earlier)
    for headers, body in revisits:
        before = earlier[headers["WARC-Target-URI"]]
        assert headers["WARC-Profile"].endswith("/revisit/identical-payload-digest")
        assert headers["WARC-Payload-Digest"] == before["WARC-Payload-Digest"]
        assert headers["WARC-Refers-To-Target-URI"] == before["WARC-Target-URI"]
        assert headers["WARC-Refers-To-Date"] == before["WARC-Date"]
        assert body == b""
    assert all(status != 200 for kind, _, status, _ in again if kind == "response")


def test_the_index_finds_a_capture_and_exports_cdxj(site: ThreadedDemoSite, tmp_path: Path) -> None:
    archive, state = tmp_path / "warc", tmp_path / "state"
    crawl(state, site.url("lab"), "--archive", str(archive))
    archived = sum(1 for kind, *_ in records(archive) if kind == "response")
    page = site.url("lab", "/page/1")
    listed = runner.invoke(app, ["archive", "list", page, "--state", str(state)])
    assert listed.exit_code == 0, listed.output
    assert page in listed.stdout
    got = tmp_path / "page.html"
    fetched = runner.invoke(app, ["archive", "get", page, "--state", str(state), "-o", str(got)])
    assert fetched.exit_code == 0, fetched.output
    assert got.read_bytes() == sent_by(page)
    nested = site.url("lab", "/nested?depth=3")  # gzip on the wire: get undoes it
    crawl(tmp_path / "other", nested, "--archive", str(archive), "--max-depth", "0")
    decoded = runner.invoke(app, ["archive", "get", nested, "--state", str(tmp_path / "other")])
    assert decoded.exit_code == 0, decoded.output
    assert "<div><div><div>" in decoded.stdout
    cdxj = tmp_path / "index.cdxj"
    exported = runner.invoke(app, ["archive", "cdxj", "--state", str(state), "-o", str(cdxj)])
    assert exported.exit_code == 0, exported.output
    lines = cdxj.read_text().splitlines()
    assert lines == sorted(lines)
    assert len(lines) == archived
    key, stamp, fields = lines[0].split(" ", 2)
    assert key.startswith("4,0,0,127:")
    assert len(stamp) == 14
    assert '"filename":' in fields


def test_archive_commands_without_an_archive_say_so(tmp_path: Path) -> None:
    result = runner.invoke(app, ["archive", "list", "--state", str(tmp_path)])
    assert result.exit_code == 2
    assert "no archive index" in result.output


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_reparse_gives_the_crawls_items_and_asks_the_site_nothing(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    """The aisles example carries each item's category as context from its listing: the
    reparse sees the same context (kept in the records) and writes the same export."""
    example = EXAMPLES / "aisles"
    config = ["--config", str(example / "crawl.toml"), "--parsers", str(example / "parsers.py")]
    archive, crawled, reparsed = tmp_path / "warc", tmp_path / "crawl.jsonl", tmp_path / "re.jsonl"
    crawl(
        tmp_path / "state",
        site.url("shop", "/aisles/"),
        *config,
        "--archive",
        str(archive),
        "-o",
        str(crawled),
    )
    site.clear_log()
    result = runner.invoke(
        app, ["reparse", "--archive", str(archive), *config, "-o", str(reparsed)]
    )
    assert result.exit_code == 0, result.output
    assert site.log == []
    assert crawled.read_bytes().count(b"\n") == 50
    assert reparsed.read_bytes() == crawled.read_bytes()
    assert "no request made" in result.output
    assert "links found (not crawled)" in result.output
    assert "1 side fetch" in result.output  # robots.txt is not a page


def test_reparse_of_no_archive_says_so(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["reparse", "--archive", str(tmp_path), "-o", str(out)])
    assert result.exit_code == 2
    assert "no .warc.gz files" in result.output
    assert not out.exists()


def test_prune_removes_old_files_and_their_captures(site: ThreadedDemoSite, tmp_path: Path) -> None:
    archive, state = tmp_path / "warc", tmp_path / "state"
    crawl(state, site.url("lab"), "--archive", str(archive))
    [old] = archive.rglob("*.warc.gz")
    forty_days_ago = time.time() - 40 * 86_400
    os.utime(old, (forty_days_ago, forty_days_ago))
    crawl(tmp_path / "state", site.url("lab"), "--archive", str(archive), "--fresh")
    assert len(list(archive.rglob("*.warc.gz"))) == 2
    args = ["archive", "prune", "--older-than", "30d", "--state", str(state)]
    dry = runner.invoke(app, [*args, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert old.name in dry.stdout
    assert old.exists()
    pruned = runner.invoke(app, args)
    assert pruned.exit_code == 0, pruned.output
    assert not old.exists()
    assert len(list(archive.rglob("*.warc.gz"))) == 1
    listed = runner.invoke(app, ["archive", "cdxj", "--state", str(state)])
    assert old.name not in listed.stdout
    assert listed.stdout.count("\n") > 10  # the second crawl's captures stay
    bad = runner.invoke(app, [*args[:2], "--older-than", "soon", "--state", str(state)])
    assert bad.exit_code == 2
    assert "--older-than 'soon'" in bad.output


def test_a_distributed_crawl_with_an_archive_and_no_postgres_is_refused_at_once(
    tmp_path: Path,
) -> None:
    redis = ["--redis", "redis://127.0.0.1:1/0"]
    result = runner.invoke(
        app, ["crawl", "http://127.0.0.1:1/", *redis, "--archive", str(tmp_path)]
    )
    assert result.exit_code == 2
    assert "keeps its archive index in postgres_dsn" in result.output


def test_reparse_with_a_state_keeps_the_items_in_its_items_file(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    archive = tmp_path / "warc"
    crawl(tmp_path / "state", site.url("quotes"), "--archive", str(archive))
    out, kept = tmp_path / "re.jsonl", tmp_path / "kept"
    result = runner.invoke(
        app, ["reparse", "--archive", str(archive), "--state", str(kept), "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    exported = tmp_path / "export.jsonl"
    again = runner.invoke(app, ["export", "--state", str(kept), "-o", str(exported)])
    assert again.exit_code == 0, again.output
    assert exported.read_bytes() == out.read_bytes()
    assert out.read_bytes().count(b"\n") > 10


@pytest.mark.browser
@pytest.mark.slow
def test_the_browsers_rendered_pages_are_archived_marked_and_reparse_alike(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    parsers = ["--parsers", str(EXAMPLES / "jsapp" / "parsers.py")]
    archive, crawled, reparsed = tmp_path / "warc", tmp_path / "crawl.jsonl", tmp_path / "re.jsonl"
    crawl(
        tmp_path / "state",
        site.url("jsapp", "/"),
        *parsers,
        "--archive",
        str(archive),
        "-o",
        str(crawled),
    )
    rendered = [
        (headers, body)
        for kind, headers, _, body in records(archive)
        if kind == "response" and headers.get("X-Crawlfleet-Rendered") == "dom"
    ]
    assert rendered
    assert any(item_name(7).encode() in body for _, body in rendered)  # written by script
    result = runner.invoke(
        app, ["reparse", "--archive", str(archive), *parsers, "-o", str(reparsed)]
    )
    assert result.exit_code == 0, result.output
    assert reparsed.read_bytes() == crawled.read_bytes()
    assert crawled.read_bytes().count(b'"js_item"') == JS_ITEMS


def test_reparse_into_postgresql_stores_the_crawls_items_under_a_crawl_id(
    site: ThreadedDemoSite, tmp_path: Path, postgres_dsn: str
) -> None:
    archive, crawled, out = tmp_path / "warc", tmp_path / "crawl.jsonl", tmp_path / "re.jsonl"
    crawl(tmp_path / "state", site.url("quotes"), "--archive", str(archive), "-o", str(crawled))
    args = ["reparse", "--archive", str(archive), "--postgres", postgres_dsn, "--crawl-id", "re"]
    result = runner.invoke(app, [*args, "-o", str(out)])
    assert result.exit_code == 0, result.output

    def keys(path: Path) -> set[tuple[str, str]]:
        return {(o["type"], o["key"]) for o in map(orjson.loads, path.read_bytes().splitlines())}

    assert keys(out) == keys(crawled)
    assert len(keys(out)) > 10
    both = runner.invoke(app, [*args, "--state", str(tmp_path / "s"), "-o", str(out)])
    assert both.exit_code == 2
    assert "not both" in both.output


def test_a_record_cut_short_is_counted_not_parsed(site: ThreadedDemoSite, tmp_path: Path) -> None:
    archive = tmp_path / "warc"
    crawl(
        tmp_path / "state",
        site.url("lab", "/page/1"),
        "--archive",
        str(archive),
        "--max-depth",
        "0",
    )
    [path] = archive.rglob("*.warc.gz")
    path.write_bytes(path.read_bytes()[:-100])  # what a writer killed mid-record leaves
    out = tmp_path / "re.jsonl"
    result = runner.invoke(app, ["reparse", "--archive", str(archive), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "1 damaged record" in result.output
    got = runner.invoke(
        app, ["archive", "get", site.url("lab", "/page/1"), "--state", str(tmp_path / "state")]
    )
    assert got.exit_code == 2
    assert "damaged" in got.output


def test_no_credential_goes_into_the_archive(site: ThreadedDemoSite, tmp_path: Path) -> None:
    archive = tmp_path / "warc"
    staff = site.url("shop", "/staff/").replace("http://", "http://staff:backstage-7@")
    crawl(tmp_path / "state", staff, "--archive", str(archive), "--max-depth", "0")
    requests = [(h, body) for kind, h, _, body in records(archive) if kind == "request"]
    assert requests
    raw = b"".join(gzip.decompress(path.read_bytes()) for path in archive.rglob("*.warc.gz"))
    assert b"backstage-7" not in raw
    assert base64.b64encode(b"staff:backstage-7") not in raw
    assert b"Authorization: [redacted]" in raw
    statuses = [s for kind, _, s, _ in records(archive) if kind == "response"]
    assert 200 in statuses  # the page behind Basic auth was fetched with it


def test_the_impersonate_fetchers_responses_are_archived_as_the_server_sent_them(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    """The picky pages answer only a browser's client hints: the domain climbs to the
    impersonate fetcher (tests/e2e/test_strategy_ladder.py), whose responses are archived."""
    config, archive = tmp_path / "crawl.toml", tmp_path / "warc"
    config.write_text(PICKY_LADDER)
    crawl(
        tmp_path / "state",
        site.url("lab", "/picky/"),
        "--config",
        str(config),
        "--archive",
        str(archive),
    )
    served = {
        r.path for r in site.log if r.role == "lab" and r.status == 200 and "/picky/" in r.path
    }
    assert len(served) == PICKY_PAGES + 1
    pages = {
        headers["WARC-Target-URI"]: body
        for kind, headers, status, body in records(archive)
        if kind == "response" and status == 200 and "/picky/" in headers["WARC-Target-URI"]
    }
    assert set(pages) == {site.url("lab", path) for path in served}
    for url, body in pages.items():
        assert body == sent_by(url, {"sec-ch-ua": '"Chromium";v="146"'}), url
    [path] = archive.rglob("*.warc.gz")
    with path.open("rb") as handle:
        sent = [
            r.http_headers
            for r in ArchiveIterator(handle)
            if r.rec_type == "request" and "/picky/page/" in r.rec_headers["WARC-Target-URI"]
        ]
    browser_like = [h for h in sent if h.get_header("sec-ch-ua")]
    assert len(browser_like) == PICKY_PAGES
    assert all("Chrome/" in h.get_header("User-Agent") for h in browser_like)


BROKEN_ON_ONE_PAGE = """
from crawlfleet.parsing.plugins import parser


@parser(pattern="/page/*", item_type="page")
def page(response):
    if response.url.endswith("/page/2"):
        raise ValueError("page 2 breaks this parser")
    yield {"key": response.url, "title": response.css_first("title").text()}
"""


def test_reparse_in_parse_processes_gives_the_same_items_and_errors_in_order(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    parsers = tmp_path / "broken.py"
    parsers.write_text(BROKEN_ON_ONE_PAGE)
    archive = tmp_path / "warc"
    crawl(tmp_path / "state", site.url("lab"), "--archive", str(archive))
    outputs = []
    for jobs in ("1", "2"):
        out = tmp_path / f"jobs-{jobs}.jsonl"
        result = runner.invoke(
            app,
            ["reparse", "--archive", str(archive), "--parsers", str(parsers), "--jobs", jobs,
             "-o", str(out)],
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        assert "1 parse error" in result.output
        assert "page 2 breaks this parser" in result.output  # the first error, named
        assert ("starting parse processes" in result.output) == (jobs == "2")  # not timed
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]
    assert outputs[0].count(b'"type":"page"') >= 3


def test_a_parse_process_that_dies_stops_the_reparse_with_one_line(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    parsers = tmp_path / "exits.py"
    parsers.write_text(
        BROKEN_ON_ONE_PAGE.replace(
            'raise ValueError("page 2 breaks this parser")', "import os; os._exit(3)"
        )
    )
    archive = tmp_path / "warc"
    crawl(tmp_path / "state", site.url("lab"), "--archive", str(archive))
    result = runner.invoke(
        app,
        ["reparse", "--archive", str(archive), "--parsers", str(parsers), "--jobs", "2",
         "-o", str(tmp_path / "out.jsonl")],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "error: a parse process died while parsing" in " ".join(result.output.split())
    assert "--jobs 1 parses in this process" in " ".join(result.output.split())
