"""The web dashboard: an ASGI app (Starlette, served by uvicorn) over a crawl's store.

``sources`` is the port (``Source``) the pages read through: ``embedded`` reads a crawl's
state directory read-only (``frontier.sqlite.reader``), ``distributed`` every crawl of a
fleet's Redis and PostgreSQL (``crawl_frontier``: each crawl's frontier, reopened when
the crawl is started over); ``workers`` derives each worker's pages/s from its heartbeats;
``sampler`` keeps each crawl's progress history, rate and politeness-aware ETA (and the
``/metrics`` snapshots); ``pages`` renders HTML (a server-side SVG chart, no
script, no CDN); ``app`` routes pages and the token-guarded actions (requeue and purge a
dead-letter class, pause, resume). ``starlette`` and ``uvicorn`` come with the ``dashboard``
extra and are imported only here and by ``crawlfleet dashboard``.
"""
