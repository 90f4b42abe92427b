"""The package installed as users install it crawls the demo site: embedded, distributed, browser.

``scripts/check_clean_install.sh`` builds fresh venvs outside the tree (``.[distributed]``
only for a worker host, ``.`` for the embedded crawler, ``.[browser]`` for a browser host)
and runs the crawls with private Redis and PostgreSQL servers and Debian's Chromium. A dependency that only the test tools bring in fails it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "check_clean_install.sh"
SCRIPT_TIMEOUT_S = 240.0
CLEANUP_S = 30.0


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.timeout(SCRIPT_TIMEOUT_S + CLEANUP_S + 10)
def test_clean_installs_crawl_the_demo_site_embedded_distributed_and_in_a_browser() -> None:
    if shutil.which("python3") is None:
        pytest.skip("python3 not on PATH")
    script = subprocess.Popen(
        [str(SCRIPT)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "CI": "true"},
        start_new_session=True,
    )
    try:
        output, _ = script.communicate(timeout=SCRIPT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(script.pid, signal.SIGTERM)  # the script's trap stops its servers
        output, _ = script.communicate(timeout=CLEANUP_S)
        pytest.fail(f"{SCRIPT.name} took over {SCRIPT_TIMEOUT_S} s:\n{output[-6000:]}")
    assert script.returncode == 0, output[-6000:]
    assert "ok: both installs crawled" in output
