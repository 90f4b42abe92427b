"""A deterministic local web site with several hosts, for tests, benchmarks and the quickstart.

Each role is served on its own loopback address (``DEFAULT_ADDRESSES``), all on one port:
``shop`` (a product catalogue, data in ``PRODUCTS``), ``quotes`` (``QUOTES``, ``AUTHORS``),
``lab`` (crawler edge cases; hostile ones only behind ``/hazards``), ``robots-5xx``,
``robots-404`` and ``slow-robots`` (robots.txt answering 503, 404, or with a Crawl-delay),
``guarded`` (bans bursts per client address, checks header coherence, a cookie challenge).
``jsapp`` (content, links and a cookie challenge only a browser gets past) and ``mixed``
(one host with a URL pattern that needs JavaScript and one that does not), ``catalog`` and
``redesign`` (one product catalogue; ``redesign`` changes its templates after a set number
of pages: ``DemoSite.redesign``).
Every request is recorded in an access log of ``AccessRecord``.
"""

from crawlfleet.demosite.accesslog import AccessRecord, gaps_s, read_access_log
from crawlfleet.demosite.guarded import GuardRules
from crawlfleet.demosite.quotes_data import AUTHORS, QUOTES, Author, Quote
from crawlfleet.demosite.roles import DEFAULT_ADDRESSES, GUARDED, ROLES
from crawlfleet.demosite.server import DemoSite
from crawlfleet.demosite.shop_data import PRODUCTS, Product
from crawlfleet.demosite.threaded import ThreadedDemoSite

__all__ = [
    "AUTHORS",
    "DEFAULT_ADDRESSES",
    "GUARDED",
    "PRODUCTS",
    "QUOTES",
    "ROLES",
    "AccessRecord",
    "Author",
    "DemoSite",
    "GuardRules",
    "Product",
    "Quote",
    "ThreadedDemoSite",
    "gaps_s",
    "read_access_log",
]
