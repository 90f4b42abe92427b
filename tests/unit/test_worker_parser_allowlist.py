"""A worker imports only the parser modules its operator allowed (``worker --parsers``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from crawlfleet.cli.main import app
from crawlfleet.errors import ConfigError
from crawlfleet.runtime.celery.definition import CrawlDefinition, check_parsers
from crawlfleet.settings import Settings

PARSER = "from crawlfleet.parsing.plugins import parser\n"


def definition(*parsers: str, **settings: object) -> CrawlDefinition:
    return CrawlDefinition(
        Settings(parsers=list(parsers), crawl_id="c1", **settings), ("http://127.0.0.2/",)
    )


def refusal(defn: CrawlDefinition, allowed: list[str]) -> str:
    with pytest.raises(ConfigError) as caught:
        check_parsers(defn, allowed)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_no_parser_modules_need_no_allowing() -> None:
    check_parsers(definition(), [])
    spec = {"domain": "127.0.0.2", "item_type": "t", "fields": {"title": "title"}}
    check_parsers(definition(selector_parsers=[spec]), [])


def test_a_module_not_allowed_is_refused_with_its_name() -> None:
    message = refusal(definition("os"), [])
    assert "crawl 'c1'" in message
    assert "'os'" in message
    assert "--parsers" in message


def test_modules_compare_by_exact_dotted_name() -> None:
    check_parsers(definition("shop_parsers", "quotes.parsers"), ["quotes.parsers", "shop_parsers"])
    assert "'shop_parsers.evil'" in refusal(definition("shop_parsers.evil"), ["shop_parsers"])
    assert "'shop'" in refusal(definition("shop"), ["shop_parsers"])


def test_paths_compare_by_the_file_they_resolve_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    allowed = tmp_path / "team" / "parsers.py"
    allowed.parent.mkdir()
    allowed.write_text(PARSER)
    (tmp_path / "link.py").symlink_to(allowed)
    other = tmp_path / "other" / "parsers.py"
    other.parent.mkdir()
    other.write_text(PARSER)
    monkeypatch.chdir(tmp_path)

    check_parsers(
        definition(str(allowed), "link.py", "./team/../team/parsers.py"), ["team/parsers.py"]
    )
    assert str(other) in refusal(definition(str(other)), ["team/parsers.py"])
    assert "parsers.py" in refusal(definition("parsers.py"), ["team/parsers.py"])


def test_an_unresolvable_path_is_refused_not_raised() -> None:
    assert "evil" in refusal(definition("evil\x00.py"), ["evil\x00.py"])


def test_a_long_refusal_stays_one_short_line() -> None:
    names = [f"mod{n}" for n in range(10)] + ["x\ny" * 500]
    message = refusal(definition(*names), [])
    assert "and 8 more" in message
    assert len(message) < 600


def test_worker_refuses_to_start_with_an_allowed_parser_it_cannot_import() -> None:
    result = CliRunner().invoke(
        app,
        [
            "worker",
            "--redis", "redis://127.0.0.1:1/0",
            "--postgres", "postgresql://127.0.0.1:1/x",
            "--parsers", "no_such_parser_module_xyz",
        ],
        env={"COLUMNS": "500"},
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert "no_such_parser_module_xyz" in lines[0]


def test_processor_and_hook_modules_need_the_same_allowing() -> None:
    defn = definition(processors=["mypkg.steps:price"], hooks=["mypkg.sign:Signer"])
    message = refusal(defn, [])
    assert "'mypkg.steps'" in message
    assert "'mypkg.sign'" in message
    check_parsers(defn, ["mypkg.steps", "mypkg.sign"])


def test_a_stored_definition_of_an_archiving_crawl_reads_without_its_dsn(tmp_path: Path) -> None:
    # The definition is stored without the PostgreSQL DSN (workers add theirs): `status`
    # over a Redis holding an archiving crawl failed to read it ("keeps its archive index").
    settings = Settings(redis_url="redis://127.0.0.1:6379/0", archive=str(tmp_path))
    stored = CrawlDefinition(settings, ("http://a.test/",), "run-1").to_json()
    assert CrawlDefinition.from_json(stored).settings.archive == str(tmp_path)
