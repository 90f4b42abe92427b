"""Retention: the archive's WARC files older than a cut-off, removed with their index rows."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from crawlfleet.archive.protocols import S3_SCHEME, WARC_SUFFIX, CaptureIndex
from crawlfleet.errors import StateError


@dataclass(frozen=True, slots=True)
class Pruned:
    """What a prune removed (or, in a dry run, would remove)."""

    files: list[str]
    size_bytes: int
    captures: int


def _stored(root: str) -> list[tuple[str, int, float]]:
    """(name relative to ``root``, size, last change) of every WARC file of the archive."""
    if root.startswith(S3_SCHEME):
        from crawlfleet.archive.s3 import S3Archive, S3Location  # boto3

        listed = S3Archive(S3Location.parse(root)).files()
        return [(f.name, f.size_bytes, f.modified_at) for f in listed]
    base = Path(root)
    if not base.is_dir():
        raise StateError(f"no archive directory at {root}")
    found = []
    for path in sorted(base.rglob(f"*{WARC_SUFFIX}")):
        stat = path.stat()
        found.append((str(path.relative_to(base)), stat.st_size, stat.st_mtime))
    return found


def prune(index: CaptureIndex, cutoff: float, *, dry_run: bool = False) -> Pruned:
    """Remove the files of ``index``'s archive last changed before ``cutoff`` (epoch s), then
    their captures from the index; with ``dry_run`` only say which."""
    root = index.root
    if root is None:
        raise StateError("the archive index names no archive directory or bucket")
    old = [(name, size) for name, size, modified in _stored(root) if modified < cutoff]
    names = [name for name, _ in old]
    captures = 0
    if not dry_run and names:
        if root.startswith(S3_SCHEME):
            from crawlfleet.archive.s3 import S3Archive, S3Location

            archive = S3Archive(S3Location.parse(root))
            for name in names:
                archive.delete(name)
        else:
            for name in names:
                (Path(root) / name).unlink()
        captures = index.forget_files(names)
    return Pruned(names, sum(size for _, size in old), captures)
