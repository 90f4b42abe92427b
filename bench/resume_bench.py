"""How soon a resumed embedded crawl with a large state starts fetching.

Builds the state of a crawl that has done ``--done`` pages and has ``--queued`` pages left (one
real crawl of one page for the directory's identity and schema, then the state file filled
with the rows such a crawl leaves: requests, attempts, items), then resumes it with the usual
command against a local HTTP server and measures the seconds from the command's start to the
first request of a queued page, and the whole resumed run.

    .venv/bin/python bench/resume_bench.py --done 1000000 --queued 2000
"""

from __future__ import annotations

import argparse
import http.server
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
WORK = BENCH / "_work" / "resume"
CRAWLFLEET = Path(sys.executable).parent / "crawlfleet"
PAGE = b"<html><head><title>p</title></head><body><p>page</p></body></html>"


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    first_page_at: float | None = None
    pages = 0


class Handler(http.server.BaseHTTPRequestHandler):
    server: Server

    def do_GET(self) -> None:
        if self.path.startswith("/q/"):
            if self.server.first_page_at is None:
                self.server.first_page_at = time.time()
            self.server.pages += 1
        body = b"User-agent: *\nAllow: /\n" if self.path == "/robots.txt" else PAGE
        self.send_response(200)
        self.send_header(
            "Content-Type", "text/plain" if self.path == "/robots.txt" else "text/html"
        )
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        """Quiet."""


def crawl(seed: str, state: Path, *extra: str) -> subprocess.CompletedProcess[bytes]:
    argv = [str(CRAWLFLEET), "crawl", seed, "--concurrency", "64", "--delay", "0"]
    argv += ["--per-domain-concurrency", "64", "--allow-private-addresses", "--state", str(state)]
    return subprocess.run([*argv, *extra], capture_output=True, check=True)


def fill(state: Path, domain: str, origin: str, done: int, queued: int) -> None:
    """Add ``done`` finished requests with an attempt and an item each, and ``queued`` more."""
    db = sqlite3.connect(state / "state.sqlite", isolation_level=None)
    items = sqlite3.connect(state / "items.sqlite", isolation_level=None)
    batch = 50_000
    for start in range(0, done + queued, batch):
        numbers = range(start, min(start + batch, done + queued))
        db.execute("BEGIN")
        db.executemany(
            "INSERT INTO requests (fp, url, domain, state, depth) VALUES (?, ?, ?, ?, 1)",
            (
                (f"{n:032x}", f"{origin}/{'d' if n < done else 'q'}/{n}.html", domain,
                 2 if n < done else 0)
                for n in numbers
            ),
        )  # fmt: skip
        db.executemany(
            "INSERT INTO attempts (url, fingerprint, domain, worker, outcome, status, bytes,"
            " latency_s, retry, at) VALUES (?, ?, ?, 'bench', 'ok', 200, 20000, 0.01, 0, ?)",
            (
                (f"{origin}/d/{n}.html", f"{n:032x}", domain, time.time())
                for n in numbers
                if n < done
            ),
        )
        db.execute("COMMIT")
        items.execute("BEGIN")
        items.executemany(
            "INSERT INTO items VALUES ('default', 'product', ?, ?, ?, 1.0, 1.0, 1.0, 1.0)",
            ((f"{n:09d}", f'{{"id": {n}, "name": "product {n}"}}', f"{n:032x}")
             for n in numbers if n < done),
        )  # fmt: skip
        items.execute("COMMIT")
    db.execute(
        "UPDATE domains SET admitted = admitted + ? WHERE domain = ?", (done + queued, domain)
    )
    db.close()
    items.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--done", type=int, default=1_000_000)
    parser.add_argument("--queued", type=int, default=2_000)
    parser.add_argument("--port", type=int, default=18479)
    args = parser.parse_args()
    server = Server(("127.0.0.1", args.port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{args.port}"
    seed = f"{origin}/"
    shutil.rmtree(WORK, ignore_errors=True)
    state = WORK / "state"
    crawl(seed, state, "--max-pages", "1")
    fill(state, "127.0.0.1", origin, args.done, args.queued)
    sizes = {p.name: p.stat().st_size / 1e6 for p in sorted(state.glob("*.sqlite"))}
    started = time.time()
    crawl(seed, state)
    ended = time.time()
    if server.first_page_at is None:
        sys.exit("the resumed crawl fetched no queued page")
    print(
        f"state of {args.done} done + {args.queued} queued pages: "
        + ", ".join(f"{name} {mb:.0f} MB" for name, mb in sizes.items())
        + f"\nresumed: first queued page fetched {server.first_page_at - started:.2f} s after"
        f" the command started; {server.pages} queued pages in {ended - started:.1f} s"
    )
    server.shutdown()


if __name__ == "__main__":
    main()
