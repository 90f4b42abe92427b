"""The web dashboard: an ASGI app (Starlette, served by uvicorn) over a crawl's store.

The pages read and act through the operations layer (``crawlfleet.ops``: the
``Operations`` port, embedded or distributed); ``sampler`` keeps each crawl's progress
history, rate and politeness-aware ETA (and the ``/metrics`` snapshots); ``pages`` renders
HTML (a server-side SVG chart, no script, no CDN); ``app`` routes pages and the token-guarded actions (requeue and purge a
dead-letter class, pause, resume). ``starlette`` and ``uvicorn`` come with the ``dashboard``
extra and are imported only here and by ``crawlfleet dashboard``.
"""
