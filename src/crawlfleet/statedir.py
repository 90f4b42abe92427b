"""The state directory of an embedded crawl: who holds it, which crawl it is, what --fresh removes.

Files the crawler owns in the directory (nothing else in it is ever touched):

- ``crawl.lock``: ``flock``-ed by the process that has the directory, for the whole crawl.
- ``crawl.json``: the crawl's identity (``crawl_identity``) and its SHA-256. A crawl whose
  identity differs is refused: resuming it would crawl the old queue and mix both outputs.
  Beside them, outside the hash, the running crawl's ``POLITENESS_SETTINGS`` (``politeness``),
  so the readers of the directory (``status``, the dashboard) show its delays, not defaults.
  A directory from before identities (a state file, no ``crawl.json``) is taken as the
  current crawl's.
- ``paused``: present while the crawl is paused (``crawlfleet pause --state``).
- ``state.sqlite`` and ``items.sqlite`` with their ``-wal``, ``-shm`` and ``-journal`` files,
  ``crawl.json`` and ``paused``: the only files ``fresh`` deletes, after taking the lock (and the state file's own lock, so
  a ``crawlfleet dlq`` at work on it is not pulled from under its feet either).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from crawlfleet.errors import StateError
from crawlfleet.redact import redact
from crawlfleet.sqlitedb import FileLock

LOCK_NAME = "crawl"
"""``FileLock`` locks ``<name>.lock``: the directory's lock is ``crawl.lock``."""
IDENTITY_FILE = "crawl.json"
PAUSE_FILE = "paused"
"""Present while the crawl is paused (``crawlfleet pause --state``; ``runtime/control.py``)."""
DATABASES = ("state.sqlite", "items.sqlite")
SIDE_FILES = ("", "-wal", "-shm", "-journal")

IDENTITY_SETTINGS = (
    "allowed_domains",
    "allow",
    "deny",
    "max_depth",
    "follow_sitemaps",
    "obey_robots",
    "politeness_key",
    "strip_query_params",
    "crawl_id",
)
"""The settings that change which URLs a crawl visits or how it names them and its items.

Budgets, politeness, timeouts and parsers are left out: a crawl may resume with more pages
allowed, another delay or a fixed parser.
"""


POLITENESS_SETTINGS = ("delay_s", "delay_source", "per_domain_concurrency", "max_crawl_delay_s")
"""The settings of a domain's default politeness that the run in a directory records."""


def politeness(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The ``POLITENESS_SETTINGS`` of ``settings``, the crawl's settings by name
    (``dict(Settings)``)."""
    return {name: settings[name] for name in POLITENESS_SETTINGS}


def recorded_identity(path: Path) -> dict[str, Any]:
    """The identity (seeds and ``IDENTITY_SETTINGS``) the crawl in the state directory
    ``path`` recorded; ``StateError`` when there is none."""
    try:
        stored = orjson.loads((path / IDENTITY_FILE).read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise StateError(f"no crawl recorded in {path} ({IDENTITY_FILE}: {exc})") from None
    found = stored.get("identity") if isinstance(stored, dict) else None
    if not isinstance(found, dict) or not isinstance(found.get("seeds"), list):
        raise StateError(f"no crawl recorded in {path} ({IDENTITY_FILE} holds no identity)")
    return found


def recorded_politeness(path: Path) -> dict[str, Any]:
    """The ``POLITENESS_SETTINGS`` the last run in the state directory ``path`` recorded.

    Empty when there are none (no ``crawl.json``, or one from before they were recorded).
    """
    try:
        stored = orjson.loads((path / IDENTITY_FILE).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    found = stored.get("politeness") if isinstance(stored, dict) else None
    if not isinstance(found, dict):
        return {}
    return {name: found[name] for name in POLITENESS_SETTINGS if name in found}


def crawl_identity(settings: Mapping[str, Any], seeds: Sequence[str]) -> dict[str, Any]:
    """The seeds (sorted, once each, credentials redacted) and the ``IDENTITY_SETTINGS`` of
    ``settings``, the crawl's settings by name (``dict(Settings)``)."""
    identity: dict[str, Any] = {"seeds": sorted({redact(seed) for seed in seeds})}
    for name in IDENTITY_SETTINGS:
        identity[name] = settings[name]
    return identity


def identity_hash(identity: Mapping[str, Any]) -> str:
    return hashlib.sha256(orjson.dumps(identity, option=orjson.OPT_SORT_KEYS)).hexdigest()


class StateDir:
    """A state directory held by this process until ``release``."""

    def __init__(self, path: Path, lock: FileLock) -> None:
        """Use ``StateDir.open``."""
        self.path = path
        self._lock = lock

    @classmethod
    def open(
        cls,
        path: Path,
        identity: Mapping[str, Any],
        *,
        fresh: bool,
        politeness: Mapping[str, Any] | None = None,
    ) -> StateDir:
        """Takes the directory for the crawl ``identity``, emptied of its files first if ``fresh``.

        ``politeness`` (``politeness(settings)``) is recorded beside the identity.

        ``StateError`` (one line) when another process holds it, or when it holds another
        crawl and ``fresh`` is not set; nothing is deleted then.
        """
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StateError(f"cannot create state directory {path}: {exc.strerror}") from None
        try:
            lock = FileLock(path / LOCK_NAME)
        except StateError:
            raise StateError(
                f"state directory {path} is in use by another crawl; wait for it to finish"
                " or use another --state"
            ) from None
        except OSError as exc:
            raise StateError(f"cannot lock state directory {path}: {exc.strerror}") from None
        try:
            if fresh:
                _delete_crawl_files(path)
            else:
                _check_identity(path, identity)
            _write_identity(path, identity, politeness or {})
        except BaseException:
            lock.release()
            raise
        return cls(path, lock)

    def release(self) -> None:
        self._lock.release()


def _delete_crawl_files(path: Path) -> None:
    state_lock = FileLock(path / DATABASES[0])  # StateError if a dlq command has the state file
    try:
        for name in DATABASES:
            for suffix in SIDE_FILES:
                with contextlib.suppress(FileNotFoundError):
                    (path / f"{name}{suffix}").unlink()
        for name in (IDENTITY_FILE, PAUSE_FILE):
            with contextlib.suppress(FileNotFoundError):
                (path / name).unlink()
    finally:
        state_lock.release()


def _check_identity(path: Path, identity: Mapping[str, Any]) -> None:
    try:
        stored = orjson.loads((path / IDENTITY_FILE).read_bytes())
    except FileNotFoundError:
        return
    except (OSError, orjson.JSONDecodeError) as exc:
        raise StateError(
            f"cannot read {path / IDENTITY_FILE} ({exc}); start over with --fresh"
        ) from None
    if isinstance(stored, dict) and stored.get("sha256") == identity_hash(identity):
        return
    theirs = stored.get("identity", {})
    ours = orjson.loads(orjson.dumps(identity))
    differ = sorted(
        name for name in ours.keys() | theirs.keys() if ours.get(name) != theirs.get(name)
    )
    raise StateError(
        f"state directory {path} holds another crawl ({', '.join(differ)} differ); resume it"
        " with the same seeds and scope, start over with --fresh, or use another --state"
    )


def _write_identity(path: Path, identity: Mapping[str, Any], politeness: Mapping[str, Any]) -> None:
    target = path / IDENTITY_FILE
    partial = path / f".{IDENTITY_FILE}.partial"
    body = {"identity": identity, "sha256": identity_hash(identity), "politeness": politeness}
    try:
        partial.write_bytes(orjson.dumps(body, option=orjson.OPT_INDENT_2))
        os.replace(partial, target)
    except OSError as exc:
        raise StateError(f"cannot write {target}: {exc.strerror}") from None
