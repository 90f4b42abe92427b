"""The browser fetcher: Playwright driving Debian's Chromium (decision 0012).

``launch`` (flags, what is missing), ``memory`` (RSS of the browser's processes),
``guard`` (what a page may load), ``wait`` (when a page is ready), ``pool`` (pages, contexts,
recycling), ``fetcher`` (``BrowserFetcher``). Import ``pool`` and ``fetcher`` only where
Playwright is installed (the ``browser`` extra).
"""
