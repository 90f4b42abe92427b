"""What the demo site's server saw: one record per request, in memory and optionally as JSON lines.

A request is recorded when it arrives (status 0), and its status is filled in when the response
headers are sent, so a client never sees a response before the server has logged it. A request
whose client went away before any response is recorded with status 499 (the handler is
cancelled), and one whose handler raised an unexpected exception with 500.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from aiohttp import web
from aiohttp.typedefs import Middleware

CLIENT_CLOSED = 499

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True, slots=True)
class AccessRecord:
    """One request as the server saw it.

    ``path`` includes the query string; ``address`` is the local address that accepted the
    connection; ``host`` is the Host header; ``monotonic_s`` (``time.monotonic``, comparable
    across processes on one machine) and ``wall_s`` (epoch seconds) are arrival times;
    ``client`` is the client's address (a proxy's outgoing address when it came through one).
    """

    role: str
    address: str
    host: str
    method: str
    path: str
    monotonic_s: float
    wall_s: float
    user_agent: str
    status: int
    client: str = ""

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> AccessRecord:
        return cls(**data)  # type: ignore[arg-type]


_ENTRY_KEY = web.RequestKey("crawlfleet.demosite.access_entry", AccessRecord)


class AccessLog:
    """The records of every role, in arrival order; safe to read from another thread."""

    def __init__(self, path: Path | None = None) -> None:
        self._records: list[AccessRecord] = []
        self._lock = threading.Lock()
        self._path = path

    def snapshot(self) -> list[AccessRecord]:
        with self._lock:
            return list(self._records)

    def clear(self) -> None:
        """Forget the records in memory; the JSON lines file is left as it is."""
        with self._lock:
            self._records.clear()

    def middleware(self, role: str) -> Middleware:
        """An aiohttp middleware that records every request to ``role``'s app."""

        @web.middleware
        async def record(request: web.Request, handler: Handler) -> web.StreamResponse:
            sockname = request.transport.get_extra_info("sockname") if request.transport else None
            entry = AccessRecord(
                role=role,
                address=sockname[0] if sockname else "",
                host=request.host,
                method=request.method,
                path=request.path_qs,
                monotonic_s=time.monotonic(),
                wall_s=time.time(),
                user_agent=request.headers.get("User-Agent", ""),
                status=0,
                client=request.remote or "",
            )
            request[_ENTRY_KEY] = entry
            with self._lock:
                self._records.append(entry)
            try:
                return await handler(request)
            except web.HTTPException as error:
                self._finish(request, error.status)
                raise
            except asyncio.CancelledError:
                self._finish(request, CLIENT_CLOSED)
                raise
            except Exception:
                self._finish(request, web.HTTPInternalServerError.status_code)
                raise

        return record

    async def on_response_prepare(self, request: web.Request, response: web.StreamResponse) -> None:
        """The aiohttp ``on_response_prepare`` signal handler that fills in the status."""
        self._finish(request, response.status)

    def _finish(self, request: web.Request, status: int) -> None:
        """Set the status of ``request``'s record, once."""
        entry: AccessRecord | None = request.pop(_ENTRY_KEY, None)
        if entry is None:
            return
        done = replace(entry, status=status)
        with self._lock:
            # Search from the end: the record is recent, and may be gone after clear().
            for index in range(len(self._records) - 1, -1, -1):
                if self._records[index] is entry:
                    self._records[index] = done
                    break
            if self._path is not None:
                with self._path.open("a", encoding="utf-8") as file:
                    file.write(json.dumps(asdict(done)) + "\n")


def read_access_log(path: Path) -> list[AccessRecord]:
    """The records a demo site appended to ``path`` (e.g. one run in another process)."""
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [AccessRecord.from_dict(json.loads(line)) for line in lines if line.strip()]


def gaps_s(records: Iterable[AccessRecord], role: str) -> list[float]:
    """Seconds between consecutive request arrivals at ``role``, in arrival order."""
    times = sorted(r.monotonic_s for r in records if r.role == role)
    return [later - earlier for earlier, later in itertools.pairwise(times)]
