"""The ``Response`` a parser reads: what it computes once, and from which threads."""

from __future__ import annotations

import threading
import time
from typing import Any

from crawlfleet.models import CrawlRequest, FetchResult
from crawlfleet.parsing.response import Response

URL = "https://a.test/p"


def response(data: dict[str, Any]) -> Response:
    request = CrawlRequest(url=URL, fingerprint="f" * 32, domain="a.test", data=data)
    headers = {"content-type": "text/html"}
    return Response(FetchResult(URL, URL, 200, headers, b"<p>x</p>", 0.0, request=request))


def test_a_page_read_in_one_thread_never_waits_for_another_threads_page() -> None:
    # functools.cached_property (Python 3.11) locks a property for every instance: a page's
    # tree built in a parse thread held the event loop's pages until it was done.
    started, release = threading.Event(), threading.Event()

    class Slow:
        def __deepcopy__(self, memo: dict[int, Any]) -> Slow:
            started.set()
            release.wait(5)
            return self

    slow, fast = response({"slow": Slow()}), response({"n": 1})
    reader = threading.Thread(target=lambda: slow.context)
    reader.start()
    assert started.wait(5)
    begun = time.monotonic()
    assert fast.context == {"n": 1}
    waited_s = time.monotonic() - begun
    release.set()
    reader.join()
    assert waited_s < 1


def test_what_a_response_computes_it_computes_once() -> None:
    page = response({"n": [1]})
    assert page.tree is page.tree
    assert page.context is page.context
    assert page.context == {"n": [1]}
