"""Secrets given as files: ``CRAWLFLEET_<NAME>_FILE=PATH`` sets ``CRAWLFLEET_<NAME>``.

Container platforms hand secrets over as files (compose and Docker ``secrets:`` under
``/run/secrets``, Kubernetes Secret volumes, systemd ``LoadCredential=``), not as values in
the environment, where ``docker inspect`` and ``/proc/PID/environ`` show them. The command
line reads, once at start, the file named by each variable below that ends in ``_FILE`` and
puts its content (one trailing newline dropped) in the variable without ``_FILE``, where
the settings and the ``--redis`` / ``--postgres`` options read it.

Only secret-bearing variables have a ``_FILE`` form: the PostgreSQL DSN (its password),
the Redis URL and the broker URL (their passwords), the dashboard's action token, and every site secret
(``CRAWLFLEET_SECRET_<DOMAIN>_<NAME>``, ``secretsfile.py``). ``CRAWLFLEET_SECRETS_FILE`` is
the ``secrets_file`` setting (a path), not one of these. Setting a variable and its
``_FILE`` twin is a ``ConfigError``: one of them would be silently ignored.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from pathlib import Path

from crawlfleet.errors import ConfigError

SUFFIX = "_FILE"
FILE_VARIABLES = (
    "CRAWLFLEET_POSTGRES_DSN",
    "CRAWLFLEET_REDIS_URL",
    "CRAWLFLEET_BROKER_URL",
    "CRAWLFLEET_DASHBOARD_TOKEN",
)
SITE_SECRET_PREFIX = "CRAWLFLEET_SECRET_"


def takes_file(variable: str) -> bool:
    """Whether ``variable`` (without ``_FILE``) may be given as a file."""
    return variable in FILE_VARIABLES or (
        variable.startswith(SITE_SECRET_PREFIX) and len(variable) > len(SITE_SECRET_PREFIX)
    )


def load_env_files(environ: MutableMapping[str, str]) -> list[str]:
    """Set each ``X`` from the file of ``X_FILE`` in ``environ``; the variables set, sorted.

    ``ConfigError`` (one line, never the content) if a file is missing, unreadable or empty,
    or if ``X`` is set as well.
    """
    loaded = []
    for key in sorted(environ):
        variable = key.removesuffix(SUFFIX)
        if not key.endswith(SUFFIX) or not takes_file(variable):
            continue
        if variable in environ:
            raise ConfigError(f"both {variable} and {key} are set: keep one")
        environ[variable] = read_secret(Path(environ[key]), key)
        loaded.append(variable)
    return loaded


def read_secret(path: Path, key: str) -> str:
    """The content of a secret file, one trailing newline dropped; ``ConfigError`` if unusable."""
    try:
        value = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{key}: file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8"
        raise ConfigError(f"{key}: cannot read {path}: {why}") from None
    value = value.removesuffix("\n").removesuffix("\r")
    if not value.strip():
        raise ConfigError(f"{key}: {path} is empty")
    if "\n" in value:
        raise ConfigError(f"{key}: {path} has more than one line")
    return value
