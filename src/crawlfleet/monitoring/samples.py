"""Pages kept for inspection: one per (parser, reason) a page missed its expectations for.

``<state>/mismatch/<parser>/<reason>.html`` holds the body of the first page that missed
that part, and ``<reason>.json`` its URL, final URL, status and every part it missed. A
later page with the same (parser, reason) keeps nothing: the directory stays small however
long a parser stays broken. Names are made file-safe (``[A-Za-z0-9._-]``, with a short hash
of the original so two names never meet). ``kept_samples`` and ``sample_body`` read them
back (the dashboard's drift rows link them).
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from crawlfleet.models import FetchResult

log = logging.getLogger(__name__)

DIRECTORY = "mismatch"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
MAX_NAME_CHARS = 60
_SAFE_FILE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")


def safe_name(text: str) -> str:
    """``text`` as a file name: unsafe runs replaced by ``_``, cut, and a short hash added."""
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{_UNSAFE.sub('_', text).strip('_')[:MAX_NAME_CHARS]}-{digest}"


class MismatchSamples:
    """Keeps the first page of each (parser, reason) under ``root`` (``<state>/mismatch``)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._kept: set[tuple[str, str]] = set()

    def keep(
        self, parser: str, reasons: Sequence[str], missing: Sequence[str], result: FetchResult
    ) -> list[Path]:
        """Write ``result`` for each of ``reasons`` not kept yet; the pages written.

        A file that cannot be written is logged and skipped: a sample never fails a step.
        """
        written: list[Path] = []
        for reason in reasons:
            if (parser, reason) in self._kept:
                continue
            self._kept.add((parser, reason))
            folder = self.root / safe_name(parser)
            page = folder / f"{safe_name(reason)}.html"
            meta = {
                "parser": parser,
                "reason": reason,
                "missing": list(missing),
                "url": result.url,
                "final_url": result.final_url,
                "status": result.status,
            }
            try:
                folder.mkdir(parents=True, exist_ok=True)
                with page.open("xb") as out:  # another process kept it first: leave it
                    out.write(result.body)
                page.with_suffix(".json").write_bytes(orjson.dumps(meta))
            except FileExistsError:
                continue
            except OSError as exc:
                log.warning("cannot keep the mismatched page %s: %s", result.url, exc)
                continue
            written.append(page)
        return written


@dataclass(frozen=True, slots=True)
class KeptSample:
    """A page kept for inspection: the reason it was kept for, its URL and where it is
    (``folder``/``name`` under the samples' root)."""

    reason: str
    url: str
    folder: str
    name: str


def kept_samples(root: Path, parser: str) -> list[KeptSample]:
    """The pages kept for ``parser`` under ``root``, by reason (none when nothing was kept)."""
    folder = root / safe_name(parser)
    found = []
    for meta in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        try:
            about = orjson.loads(meta.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            continue  # being written, or not ours
        page = meta.with_suffix(".html")
        if page.is_file():
            found.append(
                KeptSample(str(about["reason"]), str(about["url"]), folder.name, page.name)
            )
    return sorted(found, key=lambda sample: sample.reason)


def sample_body(root: Path, folder: str, name: str) -> bytes | None:
    """The body of the kept page ``folder``/``name`` under ``root``; None when there is no
    such page (or the names are not those ``MismatchSamples`` writes)."""
    if not _SAFE_FILE.fullmatch(folder) or not _SAFE_FILE.fullmatch(name):
        return None
    page = root / folder / name
    try:
        return page.read_bytes() if page.suffix == ".html" else None
    except OSError:
        return None
