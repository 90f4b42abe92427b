"""Site secrets (login credentials, HTTP Basic auth) by domain: a TOML file and the environment.

Never in the crawl config. The file (``--secrets FILE`` / ``secrets_file``) has one table per
domain (quote it: dots split a bare TOML key)::

    ["shop.example"]
    username = "alice"
    password = "..."
    basic_username = "staff"        # HTTP Basic auth for the domain's seed origins
    basic_password = "..."

The environment gives or overrides one value: ``CRAWLFLEET_SECRET_<DOMAIN>_<NAME>``, the
domain upper-cased with every other character than a letter or digit made ``_``
(``CRAWLFLEET_SECRET_SHOP_EXAMPLE_PASSWORD``). Values never appear in a repr, a log line or
an error: ``scrub`` removes them from a message.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import quote, urlsplit

from crawlfleet.errors import ConfigError
from crawlfleet.fetchers.credentials import Credentials
from crawlfleet.redact import MASK, redact

ENV_PREFIX = "CRAWLFLEET_SECRET_"


def env_name(domain: str, name: str) -> str:
    """The environment variable of one secret."""
    return ENV_PREFIX + re.sub(r"[^A-Z0-9]", "_", f"{domain}_{name}".upper())


class SiteSecrets:
    """Secret strings by (domain, name); the repr names the domains only."""

    def __init__(
        self, by_domain: Mapping[str, Mapping[str, str]], environ: Mapping[str, str]
    ) -> None:
        self._file = {domain: dict(values) for domain, values in by_domain.items()}
        self._environ = {k: v for k, v in environ.items() if k.startswith(ENV_PREFIX)}

    @classmethod
    def load(cls, path: Path | None, environ: Mapping[str, str] | None = None) -> SiteSecrets:
        """The secrets of the file at ``path`` (if any) and of ``environ`` (default: os)."""
        environ = os.environ if environ is None else environ
        return cls(read_secrets_file(path) if path is not None else {}, environ)

    def get(self, domain: str, name: str) -> str | None:
        """The environment's value, else the file's, else None."""
        from_env = self._environ.get(env_name(domain, name))
        return from_env if from_env is not None else self._file.get(domain, {}).get(name)

    def has(self, domain: str) -> bool:
        """Whether any secret is given for ``domain``."""
        prefix = env_name(domain, "")
        return domain in self._file or any(key.startswith(prefix) for key in self._environ)

    def scrub(self, text: str) -> str:
        """``text`` with every secret value masked (and ``redact``'s own rules applied)."""
        values = [v for values in self._file.values() for v in values.values()]
        values += list(self._environ.values())
        for value in sorted(set(values), key=len, reverse=True):
            if value:
                text = text.replace(value, MASK)
        return redact(text)

    def add_basic_auth(self, credentials: Credentials, seeds: Iterable[str]) -> None:
        """Give ``credentials`` each seed origin's Basic auth, from its host's domain entry."""
        for seed in seeds:
            parts = urlsplit(seed)
            host = (parts.hostname or "").lower()
            for domain in self._domains_of(host):
                user = self.get(domain, "basic_username")
                password = self.get(domain, "basic_password")
                if user is not None and password is not None:
                    userinfo = f"{quote(user, safe='')}:{quote(password, safe='')}"
                    netloc = parts.netloc.rpartition("@")[2]
                    credentials.add_from_url(f"{parts.scheme}://{userinfo}@{netloc}/")
                    break

    def _domains_of(self, host: str) -> list[str]:
        labels = host.split(".")
        return [".".join(labels[i:]) for i in range(len(labels))] if host else []

    def __repr__(self) -> str:
        return f"SiteSecrets({sorted(self._file)})"


def read_secrets_file(path: Path) -> dict[str, dict[str, str]]:
    """Domain -> name -> value from a TOML secrets file; ``ConfigError`` names a bad entry."""
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"secrets file not found: {path}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read secrets file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError:
        raise ConfigError(f"secrets file {path} is not valid TOML") from None  # no excerpt
    secrets: dict[str, dict[str, str]] = {}
    for domain, values in data.items():
        if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
            raise ConfigError(
                f"secrets file {path}: [{domain!r}] must be a table of strings "
                '(quote a domain with dots: ["shop.example"])'
            )
        secrets[domain.strip(".").lower()] = values
    return secrets
