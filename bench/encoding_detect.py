"""Which detector reads undeclared pages right: measured on real pages of doc packages.

Usage:
    .venv/bin/python bench/encoding_detect.py [ROOT...]      # default ROOT: /usr/share/doc

Detectors: chardetng (``chardetng-py``, Firefox's), charset-normalizer, cchardet (uchardet),
and the baseline "UTF-8 if valid, else windows-1252". Those not installed are left out with a
line saying so. The corpus, read from the HTML files under the roots (``.html``, ``.htm``,
gzipped or not, deduplicated by content):

- ``real``: pages whose bytes are not UTF-8. A declared page has its declarations stripped
  (``<meta charset>``, the ``http-equiv`` pragma, ``<?xml encoding>``); the truth is what it
  declared. An undeclared page counts only when its encoding was checked by eye
  (``VERIFIED_UNDECLARED``); the others are listed.
- ``transcoded``: UTF-8 pages whose text is mostly of one script, stripped the same way and
  encoded into that script's legacy encodings (Japanese in Shift_JIS and EUC-JP, Cyrillic in
  windows-1251 and KOI8-R, ...): the truth is the encoding they were written in.

- ``cut``: every sample above cut 300 bytes after its first non-ASCII byte: a page with
  little text, where detectors differ most.

A guess is right when the text it decodes is the text the truth decodes (``iso-8859-15`` for a
windows-1252 page whose characters both share is right). Each detector sees the first 64 KiB,
as ``parsing/encoding.py`` hands it. Time: the mean of one call a page.
"""

from __future__ import annotations

import codecs
import gzip
import hashlib
import importlib
import re
import sys
import time
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

from crawlfleet.parsing.encoding import DETECT_BYTES, decode_as, encoding_for, late_meta, prescan

# Undeclared pages whose encoding was read by eye (names of people and languages in Latin-1).
VERIFIED_UNDECLARED = {
    "libxslt1-dev/html/xslt.html": "windows-1252",  # Jérôme, Suárez, Pokorný
    "html2ps/html2ps.html": "windows-1252",  # Bokmål, Finnish, French hyphenation
}
# A script (by Unicode character name) and the legacy encodings its pages were written in.
SCRIPTS = {
    "LATIN": ("windows-1252", "windows-1250", "windows-1254"),  # the first that can write it
    "JAPANESE": ("shift_jis", "euc-jp"),  # kana among the ideographs
    "CJK": ("gbk", "big5"),
    "HANGUL": ("euc-kr",),
    "CYRILLIC": ("windows-1251", "koi8-r"),
    "GREEK": ("windows-1253", "iso-8859-7"),
    "HEBREW": ("windows-1255",),
    "ARABIC": ("windows-1256",),
    "THAI": ("windows-874",),
}
PER_ENCODING = 40  # transcoded pages kept per encoding
_DECLARATION = re.compile(
    rb"""<meta\b[^>]*charset[^>]*>|(?<=<\?xml)([^>]*?)\sencoding\s*=\s*["'][^"']*["']""", re.I
)
_TAGS = re.compile(r"<[^>]*>")


def _files(roots: list[Path]) -> Iterator[tuple[Path, bytes]]:
    seen: set[str] = set()
    for root in roots:
        for path in sorted(root.rglob("*")):
            if not re.search(r"\.s?html?(\.gz)?$", path.name) or not path.is_file():
                continue
            try:
                body = path.read_bytes()
                if path.name.endswith(".gz"):
                    body = gzip.decompress(body)
            except (OSError, EOFError, gzip.BadGzipFile):
                continue
            digest = hashlib.sha1(body).hexdigest()
            if digest not in seen:
                seen.add(digest)
                yield path, body


def _strip(body: bytes) -> bytes | None:
    """The page without its encoding declarations; None if one is left that we cannot strip."""
    stripped = _DECLARATION.sub(lambda m: b"" if m[0].startswith(b"<") else m[1], body)
    return None if prescan(stripped) or late_meta(stripped) else stripped


def _declared(body: bytes) -> str | None:
    found = re.search(rb"""<\?xml[^>]*encoding\s*=\s*["']([^"']+)""", body[:200])
    return prescan(body) or late_meta(body) or (encoding_for(found[1].decode()) if found else None)


def _script(text: str) -> str | None:
    counts: Counter[str] = Counter()
    for char in _TAGS.sub(" ", text):
        if ord(char) > 0x7F and char.isalpha():
            counts[unicodedata.name(char, "? ?").split()[0]] += 1
    if not counts:
        return None
    kana = counts.pop("HIRAGANA", 0) + counts.pop("KATAKANA", 0)
    if kana >= 20:
        counts["JAPANESE"] += kana + counts.pop("CJK", 0)
    if not counts:
        return None
    script, count = counts.most_common(1)[0]
    return script if count >= 20 and count >= 0.8 * sum(counts.values()) else None


def corpus(roots: list[Path]) -> tuple[list[tuple[str, bytes, str]], list[tuple[str, bytes, str]]]:
    """(real, transcoded) samples: (path, bytes, true WHATWG encoding)."""
    real: list[tuple[str, bytes, str]] = []
    transcoded: list[tuple[str, bytes, str]] = []
    per_encoding: Counter[str] = Counter()
    for path, body in _files(roots):
        if not re.search(rb"[\x80-\xff]", body):
            continue
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        declared = _declared(body)
        stripped = _strip(body)
        if stripped is None:
            continue
        if text is None:
            if declared is None:
                key = next((k for k in VERIFIED_UNDECLARED if str(path).endswith(k)), None)
                if key is None:
                    print(f"  undeclared, not verified, left out: {path}")
                    continue
                declared = VERIFIED_UNDECLARED[key]
            if declared not in ("utf-8", "utf-16le", "utf-16be"):
                real.append((str(path), stripped, declared))
            continue
        script = _script(text)
        for name in SCRIPTS.get(script or "", ()):
            try:
                legacy = stripped.decode("utf-8").encode(codecs.lookup(name).name)
            except (UnicodeEncodeError, LookupError):
                continue
            if per_encoding[name] < PER_ENCODING:
                per_encoding[name] += 1
                transcoded.append((str(path), legacy, name))
            if script == "LATIN":
                break
    return real, transcoded


def detectors() -> dict[str, Callable[[bytes], str | None]]:
    """Each installed detector as bytes -> label."""
    found: dict[str, Callable[[bytes], str | None]] = {}
    try:
        chardetng = importlib.import_module("chardetng_py")
        found["chardetng-py"] = lambda data: str(chardetng.detect(data))
    except ImportError:
        print("  chardetng-py not installed: left out")
    try:
        normalizer = importlib.import_module("charset_normalizer")

        def _normalizer(data: bytes) -> str | None:
            best = normalizer.from_bytes(data).best()
            return None if best is None else str(best.encoding)

        found["charset-normalizer"] = _normalizer
    except ImportError:
        print("  charset-normalizer not installed: left out")
    try:
        cchardet = importlib.import_module("cchardet")
        found[f"cchardet {cchardet.__version__}"] = lambda data: cchardet.detect(data)["encoding"]
    except ImportError:
        print("  cchardet not installed: left out")

    def _baseline(data: bytes) -> str:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return "windows-1252"
        return "utf-8"

    found["windows-1252 unless UTF-8"] = _baseline
    return found


def _text(body: bytes, label: str | None) -> str | None:
    """``body`` decoded as a crawler would decode a detector's answer."""
    if label is None:
        return None
    name = encoding_for(label) or encoding_for(label.replace("_", "-"))
    if name is not None:
        return decode_as(body, name)
    try:
        return body.decode(label, errors="replace")
    except LookupError:
        return None


def main(argv: list[str]) -> None:
    roots = [Path(arg) for arg in argv] or [Path("/usr/share/doc")]
    real, transcoded = corpus(roots)
    print(f"real: {len(real)} pages {dict(Counter(truth for *_, truth in real))}")
    print(f"transcoded: {len(transcoded)} pages {dict(Counter(t for *_, t in transcoded))}")
    cut = []
    for path, body, truth in real + transcoded:
        first = re.search(rb"[\x80-\xff]", body)
        end = (first.start() if first else 0) + 300
        while end < len(body) and truth not in ("windows-1252",) and body[end] >= 0x80:
            end += 1  # do not cut a multi-byte character
        cut.append((path, body[:end], truth))
    header = (
        f"| {'detector':<28} | {'real right':>12} | {'transcoded right':>18} "
        f"| {'cut right':>11} | µs/page |"
    )
    rows = [header, "|" + "|".join("-" * (len(cell)) for cell in header.split("|")[1:-1]) + "|"]
    misses: dict[str, list[str]] = {}
    for label, detect in detectors().items():
        score = {"real": 0, "transcoded": 0, "cut": 0}
        elapsed_s = 0.0
        for kind, samples in (("real", real), ("transcoded", transcoded), ("cut", cut)):
            for path, body, truth in samples:
                head = body[:DETECT_BYTES]
                start = time.perf_counter()
                guess = detect(head)
                if kind != "cut":
                    elapsed_s += time.perf_counter() - start
                if _text(body, guess) == decode_as(body, truth):
                    score[kind] += 1
                else:
                    misses.setdefault(label, []).append(f"{kind} {truth} as {guess}: {path}")
        mean_us = elapsed_s / max(1, len(real) + len(transcoded)) * 1e6
        rows.append(
            f"| {label:<28} | {score['real']:>5} / {len(real):<4} "
            f"| {score['transcoded']:>7} / {len(transcoded):<8} "
            f"| {score['cut']:>4} / {len(cut):<4} | {mean_us:>7.0f} |"
        )
    print("\n".join(rows))
    for label, lines in misses.items():
        print(f"\n{label}: {len(lines)} wrong")
        for line in lines[:12]:
            print(f"  {line}")


if __name__ == "__main__":
    main(sys.argv[1:])
