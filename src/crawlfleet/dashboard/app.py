"""The dashboard's ASGI app (Starlette): pages, a JSON API, and token-guarded actions.

Routes:

==============================  =========================================================
``GET /``                       crawls: state, progress, rate, ETA with the bottleneck
``GET /crawl/{id}``             one crawl: summary, progress chart, domains, dead letters
                                by error class, items and data quality, workers
``GET /crawl/{id}/attempts``    recent attempts, filtered by ``domain``, ``outcome``,
                                ``status``
``GET /crawl/{id}/mismatch/{folder}/{name}``  a mismatched page kept for inspection
                                (``monitoring/samples.py``), sandboxed (CSP ``sandbox``)
``GET /api/crawls``             every crawl's figures as JSON
``GET /api/crawl/{id}``         one crawl's figures, domains and dead-letter classes (JSON)
``POST /crawl/{id}/dead/requeue``  requeue the dead letters of ``error_class``
``POST /crawl/{id}/dead/purge``    purge them
``POST /crawl/{id}/pause``, ``/resume``
``POST /crawl/{id}/resume-parser``  re-open ``parser`` on ``domain`` after a drift
``/metrics``                    the crawl families of every crawl shown (``Metrics``)
==============================  =========================================================

The dashboard is read-only unless created with a ``token``: an action carries it as the
form field ``token`` or an ``Authorization: Bearer`` header and is refused with 403
otherwise (also when no token was configured). Requiring the token in the request body is
also what keeps another site from posting actions through a visitor's browser.

Other sites' pages get nothing else either (``HostGuard``): a request whose ``Host`` is a
name that is neither ``localhost`` nor one of ``allowed_hosts`` is refused with 421, so a
DNS-rebinding page (its own name pointed at this address) cannot read the JSON API; an IP
literal is always accepted (a rebinding page cannot send one). Every answer forbids framing
(``X-Frame-Options: DENY``, CSP ``frame-ancestors 'none'``) and sniffing. The message shown
after an action is kept server-side and named by a random id in the redirect
(``?done=ID``), so a link cannot make the dashboard say something.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import secrets
from collections import OrderedDict
from collections.abc import AsyncIterator, Collection
from typing import Any, cast
from urllib.parse import parse_qs, quote

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from crawlfleet.clock import Clock, SystemClock
from crawlfleet.dashboard import pages
from crawlfleet.dashboard.figures import domain_row, sample_dict
from crawlfleet.dashboard.sampler import CrawlHistory, Sampler
from crawlfleet.errors import StateError
from crawlfleet.frontier.protocols import DeadLetters
from crawlfleet.monitoring.deadletters import ClassGroup, by_class
from crawlfleet.monitoring.metrics import Metrics
from crawlfleet.monitoring.samples import KeptSample, kept_samples, sample_body
from crawlfleet.ops.protocols import ActionRefused, CrawlReader, Operations
from crawlfleet.records import AttemptFilter

DOMAIN_ROWS = 200
DEAD_LETTERS_READ = 10_000
ATTEMPT_ROWS = 200
MAX_FORM_BYTES = 8192
FRESH_S = 1.0
"""A page reuses a crawl's sample younger than this instead of reading the store again."""
MAX_FLASHES = 100
"""Messages of recent actions kept for their redirect; the oldest go first."""
LOCAL_NAMES = frozenset({"localhost"})
SECURITY_HEADERS = [
    (b"x-frame-options", b"DENY"),
    (b"content-security-policy", b"frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]


def host_allowed(host_header: str, allowed: Collection[str]) -> bool:
    """Whether a ``Host`` header names this dashboard: an IP literal, ``localhost``, or one
    of ``allowed`` (names, case-insensitive; the port is ignored)."""
    host = host_header.strip().lower()
    if host.startswith("["):
        host = host[1 : host.find("]")] if "]" in host else host
    elif host.count(":") == 1:
        host = host.partition(":")[0]
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return host in LOCAL_NAMES or host.rstrip(".") in allowed
    return True


class HostGuard:
    """ASGI middleware: refuses a request for another host name; adds ``SECURITY_HEADERS``."""

    def __init__(self, app: Any, allowed_hosts: Collection[str]) -> None:
        self.app = app
        self.allowed = frozenset(h.strip().lower().rstrip(".") for h in allowed_hosts)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"host"), "")
        if not host_allowed(host, self.allowed):
            refused = Response(
                "misdirected request: this dashboard does not answer for that host name "
                "(start it with --allowed-host NAME to allow one)\n",
                status_code=421,
                media_type="text/plain",
            )
            await refused(scope, receive, _secured(send))
            return
        await self.app(scope, receive, _secured(send))


def _secured(send: Any) -> Any:
    async def send_secured(message: Any) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS]}
        await send(message)

    return send_secured


class Dashboard:
    """The pages and actions over one ``Operations``."""

    def __init__(
        self, source: Operations, *, token: str | None, clock: Clock, metrics: Metrics | None
    ) -> None:
        self.source = source
        self.token = token or None
        self.clock = clock
        self.sampler = Sampler(source, clock, metrics=metrics)
        self.flashes: OrderedDict[str, str] = OrderedDict()

    async def history(self, crawl_id: str) -> CrawlHistory:
        history = self.sampler.crawls.get(crawl_id)
        last = history.last if history is not None else None
        if history is None or last is None or self.clock.now() - last.at > FRESH_S:
            history = await self.sampler.sample(crawl_id)
        return history

    def allowed(self, request: Request, form: dict[str, str]) -> bool:
        if self.token is None:
            return False
        given = form.get("token", "")
        header = request.headers.get("authorization", "")
        if header.lower().startswith("bearer "):
            given = header[len("bearer ") :].strip()
        return hmac.compare_digest(given.encode(), self.token.encode())

    async def crawls(self, request: Request) -> Response:
        await self.sampler.sample_all()
        return HTMLResponse(pages.crawls_page(dict(self.sampler.crawls), self.source.mode))

    async def crawl(self, request: Request) -> Response:
        crawl_id = request.path_params["crawl_id"]
        history = await self.history(crawl_id)
        reader = await self.source.reader(crawl_id)
        now = self.clock.now()
        views = await reader.domains(DOMAIN_ROWS)
        rows = [domain_row(v, now) for v in views]
        body = pages.crawl_page(
            crawl_id,
            history,
            domains=rows,
            groups=await classes(reader),
            items=await self.source.items(crawl_id),
            workers=await self.source.workers(),
            actions=self.token is not None,
            samples=self._samples(crawl_id, {p for row in rows for p in row.drifts}),
            stored_quality=await self.source.stored_quality(crawl_id),
            flash=self.flashes.pop(request.query_params.get("done", ""), ""),
        )
        return HTMLResponse(body)

    def _samples(self, crawl_id: str, parsers: set[str]) -> dict[str, list[KeptSample]] | None:
        """The kept pages of each of ``parsers`` (None: this dashboard cannot read them)."""
        root = self.source.samples_root(crawl_id)
        if root is None:
            return None
        return {parser: kept_samples(root, parser) for parser in sorted(parsers)}

    async def mismatch_page(self, request: Request) -> Response:
        """A kept mismatched page, shown sandboxed: as the site sent it, with no script run
        and no access to the dashboard's origin."""
        crawl_id = request.path_params["crawl_id"]
        await self.source.reader(crawl_id)  # StateError: no such crawl
        root = self.source.samples_root(crawl_id)
        body = None
        if root is not None:
            body = sample_body(root, request.path_params["folder"], request.path_params["name"])
        if body is None:
            return _message("not found", "no such kept page", 404)
        return Response(
            body, media_type="text/html", headers={"content-security-policy": "sandbox"}
        )

    async def attempts(self, request: Request) -> Response:
        crawl_id = request.path_params["crawl_id"]
        q = request.query_params
        status = q.get("status") or None
        if status is not None and not status.isdigit():
            return _message("bad filter", f"status must be a number, not {status!r}", 400)
        where = AttemptFilter(
            domain=q.get("domain") or None,
            outcome=q.get("outcome") or None,
            status=None if status is None else int(status),
        )
        found = await self.source.attempts(crawl_id, where, ATTEMPT_ROWS)
        return HTMLResponse(pages.attempts_page(crawl_id, where, found))

    async def api_crawls(self, request: Request) -> Response:
        await self.sampler.sample_all()
        return JSONResponse(
            {
                crawl_id: sample_dict(h.last, h.state)
                for crawl_id, h in sorted(self.sampler.crawls.items())
                if h.last is not None
            }
        )

    async def api_crawl(self, request: Request) -> Response:
        crawl_id = request.path_params["crawl_id"]
        history = await self.history(crawl_id)
        reader = await self.source.reader(crawl_id)
        now = self.clock.now()
        sample = history.last
        if sample is None:
            raise StateError(f"crawl {crawl_id!r} has no sample yet")
        groups = await classes(reader)
        return JSONResponse(
            {
                **sample_dict(sample, history.state),
                "domains": [
                    domain_row(v, now).to_dict() for v in await reader.domains(DOMAIN_ROWS)
                ],
                "dead_letter_classes": [{"name": g.name, "count": g.count} for g in groups],
            }
        )

    async def act(self, request: Request) -> Response:
        crawl_id = request.path_params["crawl_id"]
        what = request.path_params["what"]
        form = await _form(request)
        if not self.allowed(request, form):
            why = (
                "this dashboard is read-only: start it with --token to allow actions"
                if self.token is None
                else "a valid token is needed for this action"
            )
            return _message("refused", why, 403)
        name = form.get("error_class", "")
        try:
            if what == "dead/requeue":
                done = f"requeued {await self.source.requeue_class(crawl_id, name)} dead letters ({name})"
            elif what == "dead/purge":
                done = (
                    f"purged {await self.source.purge_class(crawl_id, name)} dead letters ({name})"
                )
            elif what == "resume-parser":
                parser, domain = form.get("parser", ""), form.get("domain", "")
                requeued = await self.source.resume_parser(crawl_id, parser, domain)
                done = f"parser {parser} re-opened on {domain}: {requeued} pages requeued"
            elif what in ("pause", "resume"):
                await self.source.set_paused(crawl_id, what == "pause")
                done = f"{what}d"
            else:
                return _message("not found", f"no action {what!r}", 404)
        except ActionRefused as exc:
            return _message("refused", str(exc), 409)
        flash_id = secrets.token_urlsafe(12)
        self.flashes[flash_id] = done
        while len(self.flashes) > MAX_FLASHES:
            self.flashes.popitem(last=False)
        target = f"/crawl/{quote(crawl_id, safe='')}?{pages.query(done=flash_id)}"
        return RedirectResponse(target, status_code=303)


async def classes(reader: CrawlReader) -> list[ClassGroup]:
    """The dead letters' error classes; ``by_class`` only reads (``dead_letters``)."""
    return await by_class(cast(DeadLetters, reader), DEAD_LETTERS_READ)


async def _form(request: Request) -> dict[str, str]:
    """The fields of a small urlencoded form (Starlette's own parser needs python-multipart)."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return {}
    fields = parse_qs(body.decode("utf-8", "replace"), max_num_fields=10)
    return {name: values[0] for name, values in fields.items()}


def _message(title: str, message: str, status: int) -> Response:
    css = "refused" if status in (403, 409) else "muted"
    return HTMLResponse(pages.message_page(title, message, css), status_code=status)


async def _state_error(request: Request, exc: Exception) -> Response:
    return _message("not available", str(exc), 404)


def create_app(
    source: Operations,
    *,
    token: str | None = None,
    clock: Clock | None = None,
    metrics: Metrics | None = None,
    sample: bool = True,
    allowed_hosts: Collection[str] = (),
) -> HostGuard:
    """The dashboard over ``source``; ``metrics`` serves its crawls at ``/metrics`` when given;
    ``allowed_hosts``: the names it answers for besides ``localhost`` and IP literals.

    With ``sample`` every crawl is sampled in the background while the app runs (the
    progress chart's history, the workers' rates, the metrics' snapshots); the source is
    closed when the app shuts down.
    """
    board = Dashboard(source, token=token, clock=clock or SystemClock(), metrics=metrics)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        task = asyncio.create_task(board.sampler.run()) if sample else None
        try:
            yield
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await source.close()

    routes: list[Route] = [
        Route("/", board.crawls),
        Route("/api/crawls", board.api_crawls),
        Route("/api/crawl/{crawl_id}", board.api_crawl),
        Route("/crawl/{crawl_id}", board.crawl),
        Route("/crawl/{crawl_id}/attempts", board.attempts),
        Route("/crawl/{crawl_id}/mismatch/{folder}/{name}", board.mismatch_page),
        Route("/crawl/{crawl_id}/{what:path}", board.act, methods=["POST"]),
    ]
    if metrics is not None:
        registry = metrics.registry

        async def scrape(request: Request) -> Response:
            return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

        routes.append(Route("/metrics", scrape))
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={StateError: _state_error},
    )
    return HostGuard(app, allowed_hosts)
