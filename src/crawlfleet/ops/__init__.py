"""Operating a crawl: what the dashboard (and the operating commands) read and change.

``protocols`` is the port (``Source``) and the rows it returns; ``embedded`` serves the crawl
of one state directory, ``distributed`` every crawl of a fleet's Redis and PostgreSQL
(``crawl_frontier``: each crawl's frontier, reopened when the crawl is started over);
``workers`` derives each worker's pages/s from its heartbeats.
"""
