"""Write one named section of bench/RESULTS.md, leaving the other sections as they are."""

from __future__ import annotations

from pathlib import Path

HEADER = (
    "# crawlfleet benchmark results\n\nWritten by the scripts in `bench/`; see bench/README.md.\n"
)


def write_section(path: Path, name: str, body: str) -> None:
    """Replace the section ``name`` (between its HTML-comment markers) or append it."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    block = f"{start}\n{body.rstrip()}\n{end}"
    text = path.read_text(encoding="utf-8") if path.exists() else HEADER
    if start in text and end in text:
        before, _, rest = text.partition(start)
        _, _, after = rest.partition(end)
        text = before + block + after
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    path.write_text(text, encoding="utf-8")
