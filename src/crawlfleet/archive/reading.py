"""Reading an archive back: its WARC files, one capture at its offset, every page in order."""

from __future__ import annotations

import dataclasses
import io
import tempfile
from collections.abc import Iterator
from pathlib import Path

import orjson
from fastwarc.warc import ArchiveIterator, WarcRecord, WarcRecordType

from crawlfleet.archive.keeper import FETCH_HEADER
from crawlfleet.archive.protocols import S3_SCHEME, WARC_SUFFIX, Archived, Capture
from crawlfleet.archive.warc import payload_digest
from crawlfleet.errors import StateError


def warc_files(root: Path) -> list[Path]:
    """The WARC files under ``root`` (and its subfolders), by name; ``StateError`` for none."""
    if not root.is_dir():
        raise StateError(f"no archive directory at {root}")
    files = sorted(root.rglob(f"*{WARC_SUFFIX}"))
    if not files:
        raise StateError(f"no {WARC_SUFFIX} files under {root}")
    return files


DAMAGED = "damaged"
"""The kind of a response record whose payload does not match its ``WARC-Payload-Digest``."""


def read_file(path: Path) -> Iterator[Archived]:
    """The ``response`` and ``revisit`` records of one WARC file, in order; a response whose
    payload fails its digest comes as kind ``damaged``.

    Only the file's last record has its digest checked: a writer appends whole gzip members
    with one ``write`` (``WarcFiles``), so a killed one leaves at most its last member cut,
    and a member damaged anywhere else fails its gzip CRC (fastwarc raises). The SHA-1 of
    every payload was 3 % of a reparse's CPU (decision 0049).
    """
    kinds = WarcRecordType.response | WarcRecordType.revisit
    with path.open("rb") as handle:
        held: Archived | None = None
        for record in ArchiveIterator(handle, record_types=kinds, parse_http=True):
            if held is not None:
                yield held
            held = _archived(record, check=False)
        if held is not None:
            yield _checked(held)


def read_capture(root: str, capture: Capture) -> Archived:
    """The record ``capture`` points at, in the archive at ``root`` (a directory or an
    ``s3://`` URL), read from its offset: no file is scanned."""
    where = f"{capture.file} at offset {capture.offset}"
    if root.startswith(S3_SCHEME):
        from crawlfleet.archive.s3 import S3Archive, S3Location  # boto3

        archive = S3Archive(S3Location.parse(root))
        member = archive.read_range(capture.file, capture.offset, capture.length)
    else:
        path = Path(root) / capture.file
        try:
            with path.open("rb") as handle:
                handle.seek(capture.offset)
                member = handle.read(capture.length)
        except OSError as exc:
            raise StateError(f"cannot read {path}: {exc}") from None
    for record in ArchiveIterator(io.BytesIO(member), parse_http=True):  # one gzip member
        if record.record_type in (WarcRecordType.response, WarcRecordType.revisit):
            return _archived(record)
    raise StateError(f"no response record in {where} of {root}: is the index stale?")


def archive_records(source: str) -> Iterator[Archived]:
    """Every ``response`` and ``revisit`` record of the archive at ``source`` (a directory,
    its subfolders included, or an ``s3://`` URL: each object downloaded in turn to a
    temporary file), file by file in name order. ``StateError`` for an archive without files.
    """
    if not source.startswith(S3_SCHEME):
        for path in warc_files(Path(source)):
            yield from read_file(path)
        return
    from crawlfleet.archive.s3 import S3Archive, S3Location  # boto3

    archive = S3Archive(S3Location.parse(source))
    stored = archive.files()
    if not stored:
        raise StateError(f"no {WARC_SUFFIX} objects under {source}")
    with tempfile.TemporaryDirectory(prefix="crawlfleet-reparse-") as tmp:
        for file in stored:
            local = Path(tmp) / "current.warc.gz"
            archive.download(file.name, local)
            yield from read_file(local)
            local.unlink()


def archive_file_names(source: str) -> list[str]:
    """The WARC files of the archive at ``source`` (a directory, subfolders included, or an
    ``s3://`` URL), as names relative to it, in order; ``StateError`` for none."""
    if not source.startswith(S3_SCHEME):
        root = Path(source)
        return [path.relative_to(root).as_posix() for path in warc_files(root)]
    from crawlfleet.archive.s3 import S3Archive, S3Location  # boto3

    names = [file.name for file in S3Archive(S3Location.parse(source)).files()]
    if not names:
        raise StateError(f"no {WARC_SUFFIX} objects under {source}")
    return names


def file_records(source: str, name: str) -> Iterator[Archived]:
    """The ``response`` and ``revisit`` records of the one file ``name`` of the archive at
    ``source`` (an object is downloaded to a temporary file first)."""
    if not source.startswith(S3_SCHEME):
        yield from read_file(Path(source) / name)
        return
    from crawlfleet.archive.s3 import S3Archive, S3Location  # boto3

    archive = S3Archive(S3Location.parse(source))
    with tempfile.TemporaryDirectory(prefix="crawlfleet-reparse-") as tmp:
        local = Path(tmp) / "current.warc.gz"
        archive.download(name, local)
        yield from read_file(local)


def _checked(archived: Archived) -> Archived:
    """``archived``, of kind ``damaged`` when its payload fails its digest (cut short: the
    last record of a killed writer's file)."""
    digest = archived.digest
    if archived.kind != "response" or not digest.startswith("sha1:"):
        return archived
    if payload_digest(archived.body) == digest:
        return archived
    return dataclasses.replace(archived, kind=DAMAGED)


def _archived(record: WarcRecord, *, check: bool = True) -> Archived:
    warc = record.headers
    http = record.http_headers
    context = warc.get("X-Crawlfleet-Context")
    kind = "revisit" if record.record_type == WarcRecordType.revisit else "response"
    body = record.reader.read()
    digest = warc.get("WARC-Payload-Digest") or ""
    archived = Archived(
        url=warc.get("WARC-Target-URI") or "",
        kind=kind,
        status=(http.status_code or 0) if http is not None else 0,
        headers={k.lower(): v for k, v in http.items()} if http is not None else {},
        body=body,
        at=record.record_date.timestamp() if record.record_date else 0.0,
        digest=digest,
        page=warc.get(FETCH_HEADER, "page") == "page",
        context=orjson.loads(context) if context else {},
    )
    return _checked(archived) if check else archived
