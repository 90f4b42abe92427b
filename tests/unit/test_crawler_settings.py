"""Per-domain overrides and block rules in the settings, and the policy built from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawlfleet.errors import ConfigError
from crawlfleet.frontier.store_types import BlockRules, DelaySource, DomainPolicy
from crawlfleet.runtime.policies import domain_policy
from crawlfleet.settings.domains import DomainOverride
from crawlfleet.settings.loading import load_settings


def config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "crawl.toml"
    path.write_text(text)
    return path


def test_domain_overrides_and_block_rules_from_toml(tmp_path: Path) -> None:
    path = config(
        tmp_path,
        "[crawl]\ndelay_s = 0.5\nblock_window = 10\nblock_cooldown_s = 5\n"
        "block_refusal_threshold = 0.9\nblock_refusal_kinds = 4\n"
        '[crawl.domains."Example.com"]\ndelay_s = 5\nconcurrency = 2\n'
        '[crawl.domains."slow.example.org"]\ndelay_s = 30\n',
    )
    settings = load_settings(path)
    assert settings.domains == {
        "example.com": DomainOverride(delay_s=5.0, concurrency=2),
        "slow.example.org": DomainOverride(delay_s=30.0),
    }
    usable = ("slow", "impersonate", "browser")  # no proxies: no sessions, no tiers
    assert domain_policy(settings) == DomainPolicy(
        delay_s=0.5,
        delay_source=DelaySource.FILE,
        max_in_flight=1,
        blocks=BlockRules(
            window=10,
            cooldown_s=5.0,
            max_level=5,
            ladder=usable,
            refusal_threshold=0.9,
            refusal_kinds=4,
        ),
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[crawl.domains."a.com"]\ndelay = 5\n', "unknown setting 'domains.a.com.delay'"),
        ('[crawl.domains."a.com"]\ndelay_s = -1\n', "bad setting 'domains.a.com.delay_s'"),
        ('[crawl.domains."a.com"]\nconcurrency = 0\n', "bad setting 'domains.a.com.concurrency'"),
        ('[crawl.domains."http://a.com/"]\ndelay_s = 1\n', "is not a host name"),
        ("[crawl]\nblock_min_samples = 50\n", "block_min_samples must be <= block_window"),
        ("[crawl]\nblock_threshold = 0\n", "bad setting 'block_threshold'"),
        ("[crawl]\nblock_refusal_threshold = 1.5\n", "bad setting 'block_refusal_threshold'"),
        ("[crawl]\nblock_refusal_kinds = 21\n", "block_refusal_kinds must be <= block_window"),
        ('[crawl]\nladder = ["slow", "warp"]\n', "Input should be 'slow', 'session', 'tier'"),
        ("[crawl]\nblock_max_level = 2\n", "ladder has 5 rungs but block_max_level is 2"),
    ],
)
def test_bad_overrides_and_rules_are_one_line_errors(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")) as caught:
        load_settings(config(tmp_path, text))
    assert "\n" not in str(caught.value)
