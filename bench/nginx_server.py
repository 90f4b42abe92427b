"""A private nginx master serving the generated site, and a reader for its access log.

Nothing outside ``work_dir`` is touched: the config, pid file, temp paths, error log and access
log all live there, and nginx runs in the foreground (``daemon off``) as our child process.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

# Tab-separated: epoch seconds, listening address, status, method, request URI, body bytes.
LOG_FORMAT = "$msec\\t$server_addr\\t$status\\t$request_method\\t$request_uri\\t$body_bytes_sent"


@dataclass(frozen=True)
class LogLine:
    """One request nginx answered."""

    host: str
    status: int
    method: str
    uri: str


def render_config(
    site: Path, work_dir: Path, hosts: list[str], port: int, *, gzip: bool = False
) -> str:
    """An nginx.conf with one server per host, each rooted at ``site/<ip>``; ``gzip``: HTML is
    sent compressed (gzip level 1) to a client that accepts it, as most servers do."""
    servers = "\n".join(
        f"""    server {{
        listen {ip}:{port};
        root {(site / ip).resolve()};
        location ~ ^/r/(\\d+)$ {{ return 301 /p/$1.html; }}
    }}"""
        for ip in hosts
    )
    w = work_dir.resolve()
    return f"""daemon off;
master_process on;
worker_processes 1;
user root;
pid {w}/nginx.pid;
error_log {w}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
    types {{ text/html html; text/plain txt; }}
    default_type application/octet-stream;
    charset utf-8;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 100000;
    keepalive_timeout 60s;
    gzip {"on" if gzip else "off"};
    gzip_comp_level 1;
    log_format bench "{LOG_FORMAT}";
    access_log {w}/access.log bench;
    client_body_temp_path {w}/tmp/body;
    proxy_temp_path {w}/tmp/proxy;
    fastcgi_temp_path {w}/tmp/fastcgi;
    uwsgi_temp_path {w}/tmp/uwsgi;
    scgi_temp_path {w}/tmp/scgi;
{servers}
}}
"""


class NginxServer:
    """Start with ``start()``, stop with ``stop()``; ``access_log`` is the path to read."""

    def __init__(
        self, site: Path, work_dir: Path, hosts: list[str], port: int, *, gzip: bool = False
    ) -> None:
        self._gzip = gzip
        self._site = site
        self._work_dir = work_dir
        self._hosts = hosts
        self._port = port
        self._process: subprocess.Popen[bytes] | None = None
        self.access_log = work_dir / "access.log"

    def start(self, ready_timeout_s: float = 10.0) -> None:
        binary = shutil.which("nginx") or "/usr/sbin/nginx"
        (self._work_dir / "tmp").mkdir(parents=True, exist_ok=True)
        conf = self._work_dir / "nginx.conf"
        conf.write_text(
            render_config(self._site, self._work_dir, self._hosts, self._port, gzip=self._gzip)
        )
        subprocess.run([binary, "-t", "-q", "-c", str(conf.resolve())], check=True)
        self._process = subprocess.Popen(
            [binary, "-c", str(conf.resolve())], stdin=subprocess.DEVNULL
        )
        deadline = time.monotonic() + ready_timeout_s
        for ip in self._hosts:
            while not _accepts(ip, self._port):
                if self._process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"nginx did not start; see {self._work_dir}")
                time.sleep(0.05)

    def clear_log(self) -> None:
        """Empty the access log; nginx appends (O_APPEND), so it keeps writing from offset 0."""
        self.access_log.write_bytes(b"")

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.send_signal(signal.SIGQUIT)  # graceful: finish writing the log
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process = None

    def __enter__(self) -> NginxServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _accepts(ip: str, port: int) -> bool:
    try:
        with socket.create_connection((ip, port), timeout=0.2):
            return True
    except OSError:
        return False


def read_log(path: Path) -> list[LogLine]:
    lines = []
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        parts = raw.split("\t")
        if len(parts) >= 5:
            lines.append(
                LogLine(host=parts[1], status=int(parts[2]), method=parts[3], uri=parts[4])
            )
    return lines


def count_requests(lines: list[LogLine]) -> Counter[tuple[str, str]]:
    """How many times each (host, URI) was requested."""
    return Counter((line.host, line.uri) for line in lines)
