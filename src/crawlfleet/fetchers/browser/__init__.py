"""The browser fetcher: Playwright driving Debian's Chromium (decision 0012).

``launch`` (flags, what is missing), ``memory`` (RSS of the browser's processes),
``guard`` (what a page may load), ``wait`` (when a page is ready), ``chromium`` (the browser:
launch, recycling), ``pool`` (pages, contexts), ``fetcher`` (``BrowserFetcher``). Import
``chromium``, ``pool`` and ``fetcher`` only where Playwright is installed (the ``browser`` extra).
"""
