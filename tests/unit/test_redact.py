"""The one credential scrubber: every URL and DSN form, and messages that quote them."""

from __future__ import annotations

import pytest

from crawlfleet.redact import conninfo_pairs, credential_values, redact

CANARY = "Canary-7f3e"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"redis://user:{CANARY}@127.0.0.1:6379/0", "redis://user:***@127.0.0.1:6379/0"),
        (f"redis://:{CANARY}@127.0.0.1/0", "redis://:***@127.0.0.1/0"),
        (f"redis://127.0.0.1/0?password={CANARY}&db=1", "redis://127.0.0.1/0?password=***&db=1"),
        (f"redis://h/0?db=1&PASS={CANARY}", "redis://h/0?db=1&PASS=***"),
        (f"http://u:{CANARY}@h/x?token={CANARY}", "http://u:***@h/x?token=***"),
        (f"postgresql://u:{CANARY}@h:5432/db", "postgresql://u:***@h:5432/db"),
        (f"postgresql://u@h/db?password={CANARY}", "postgresql://u@h/db?password=***"),
        (f"host=127.0.0.1 password={CANARY} dbname=x", "host=127.0.0.1 password=*** dbname=x"),
        (f"host=h password = '{CANARY} x' user=u", "host=h password = *** user=u"),
        (f"amqp://guest:{CANARY}@127.0.0.1:5672/", "amqp://guest:***@127.0.0.1:5672/"),
        (f"redis://u:p@ss{CANARY}@h/0", "redis://u:***@h/0"),
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("host=h dbname=x", "host=h dbname=x"),
    ],
)
def test_every_form_is_redacted(text: str, expected: str) -> None:
    assert redact(text) == expected
    assert CANARY not in redact(text)


@pytest.mark.parametrize(
    "dsn",
    [
        f"host=h password={CANARY}",
        f"host=h password='{CANARY}'",
        f"postgresql://u:{CANARY}@h/db",
        f"postgresql://u:{CANARY.replace('-', '%2D')}@h/db",
        f"redis://h/0?password={CANARY}",
    ],
)
def test_a_message_quoting_the_password_is_scrubbed(dsn: str) -> None:
    message = f'connection to server failed: FATAL: password "{CANARY}" rejected'
    assert CANARY not in redact(message, dsn)


def test_conninfo_is_read_with_the_drivers_rules() -> None:
    pairs = conninfo_pairs(r"host=h password='it\'s secret' user=u")
    assert pairs["password"] == "it's secret"
    assert credential_values(r"host=h password='it\'s secret'") == {"it's secret"}
