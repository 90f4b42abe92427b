"""How Debian's Chromium is launched, and what is missing when it cannot be.

Playwright drives the Chromium the system installed (``apt-get install chromium``); it never
downloads a browser build. The flags keep a headless Chromium quiet on a server: no sandbox
(containers run it as root), no GPU, no QUIC, no first-run, background or update traffic.
"""

from __future__ import annotations

import os
from importlib.util import find_spec
from pathlib import Path

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
MARKER_FLAG = "--crawlfleet-pool="
"""A switch Chromium ignores: it names one pool's browser process, to find its process tree."""


def browser_missing(executable: Path) -> str | None:
    """What this machine lacks to run the browser fetcher (one line), or None."""
    if find_spec("playwright") is None:
        return "Playwright is not installed (pip install 'crawlfleet[browser]')"
    if not executable.is_file() or not os.access(executable, os.X_OK):
        return f"no Chromium at {executable} (apt-get install chromium, or set browser_executable)"
    return None
