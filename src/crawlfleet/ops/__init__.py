"""Operating a crawl: what the dashboard and the operating commands read and change.

``protocols`` is the port (``Operations``) and the rows it returns; ``embedded`` serves the
crawl of one state directory, ``distributed`` every crawl of a fleet's Redis and PostgreSQL
(``crawl_frontier``: each crawl's frontier, reopened when the crawl is started over);
``workers`` derives each worker's pages/s from its heartbeats. ``target`` is the one place
that picks embedded or distributed for an operator (as ``runtime/backends.py`` is for a
run); ``results`` reads what a crawl stored (items, changes, rejects, archive index) from
PostgreSQL or the state directory. ``redis`` is imported only by ``distributed``, which
``target`` loads when a Redis URL is given.
"""
