"""A private tinyproxy (Debian's ``tinyproxy``) for the benchmarks, its files under ``work_dir``.

Listens on a free port of 127.0.0.1 and sends its outgoing connections from ``bind``; runs in
the foreground (``-d``) as our child process.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

START_TIMEOUT_S = 10.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class TinyproxyServer:
    """``with TinyproxyServer(dir, bind=...) as proxy: proxy.url``."""

    def __init__(self, work_dir: Path, *, bind: str, max_clients: int = 256) -> None:
        self._work_dir = work_dir
        self._bind = bind
        self._max_clients = max_clients
        self.port = _free_port()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> TinyproxyServer:
        binary = shutil.which("tinyproxy")
        if binary is None:
            raise SystemExit("tinyproxy is not installed: apt-get install tinyproxy")
        shutil.rmtree(self._work_dir, ignore_errors=True)
        self._work_dir.mkdir(parents=True)
        w = self._work_dir.resolve()
        config = w / "tinyproxy.conf"
        config.write_text(
            f"Port {self.port}\nListen 127.0.0.1\nBind {self._bind}\nTimeout 60\n"
            f'PidFile "{w}/tinyproxy.pid"\nLogFile "{w}/tinyproxy.log"\nLogLevel Warning\n'
            f"MaxClients {self._max_clients}\nAllow 127.0.0.0/8\nDisableViaHeader Yes\n"
        )
        self._process = subprocess.Popen([binary, "-d", "-c", str(config)])
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                if self._process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"tinyproxy did not start; see {w}/tinyproxy.log") from None
                time.sleep(0.05)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(10)
