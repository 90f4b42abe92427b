"""Load the settings of a crawl, every failure a one-line ``ConfigError``.

``load_settings`` reads the TOML file (``--config``), the ``CRAWLFLEET_*`` environment
variables and the CLI flags into ``Settings`` (priorities: ``Settings``'s docstring). A
validation failure becomes one line naming the key; a value is never echoed (it may be a
secret).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_settings.exceptions import SettingsError

from crawlfleet.errors import ConfigError
from crawlfleet.settings.model import Settings


def read_toml(path: Path) -> dict[str, Any]:
    """The settings in a TOML file: a ``[crawl]`` table, or top-level keys (not both)."""
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    crawl = data.get("crawl", data)
    if not isinstance(crawl, dict):
        raise ConfigError(f"config file {path}: [crawl] must be a table")
    outside = sorted(key for key in data if key != "crawl") if crawl is not data else []
    if outside:
        raise ConfigError(
            f"config file {path}: {outside[0]!r} is above [crawl], where nothing is read: "
            "move it under [crawl] (or drop the [crawl] header and keep every key top-level)"
        )
    return crawl


def load_settings(config: Path | None = None, **cli: Any) -> Settings:
    """Build the settings from the file, the environment and the CLI flags (``None`` = unset)."""
    flags = {key: value for key, value in cli.items() if value is not None}
    toml = read_toml(config) if config is not None else {}
    try:
        return Settings(**{"_toml": toml, **flags})
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc, config)) from None
    except SettingsError as exc:
        raise ConfigError(describe_settings_error(exc)) from None


def describe_validation_error(exc: ValidationError, config: Path | None) -> str:
    """One line naming the first bad key and why."""
    first = exc.errors()[0]
    key = ".".join(str(part) for part in first["loc"]) or "settings"
    where = f" (in {config} or CRAWLFLEET_{key.upper()} or a flag)" if config else ""
    if first["type"] == "extra_forbidden":
        return f"unknown setting {key!r}{where}"
    return f"bad setting {key!r}{where}: {first['msg']}"


def describe_settings_error(exc: SettingsError) -> str:
    """One line for an environment variable pydantic-settings could not read (bad JSON)."""
    text = str(exc)
    field = text.split('"')[1] if text.count('"') >= 2 else "settings"
    cause = exc.__cause__
    why = f": {cause}" if isinstance(cause, ValueError) else ""
    return f"bad setting {field!r} in CRAWLFLEET_{field.upper()}: not valid JSON{why}"
