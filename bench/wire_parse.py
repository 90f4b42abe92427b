"""CPU a response of the wire's parse path alone: an ``Exchange`` and one ``data_received``.

The response of ``http_clients.py`` (a 9.9 KB page, head and body in one read) is fed to a
``fetchers.connection.Connection`` on a transport that sends nothing, N times; the best of
5 rounds of CPU µs a response (decision 0045: the cost of the head's bounds).

    PYTHONPATH=src .venv/bin/python bench/wire_parse.py
"""

from __future__ import annotations

import argparse
import asyncio
import time

from crawlfleet.fetchers.connection import Connection, Exchange

PAGE = b"x" * 9904
RESPONSE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
    b"Content-Length: %d\r\nConnection: keep-alive\r\n\r\n" % len(PAGE)
) + PAGE


class _Silent(asyncio.Transport):
    def write(self, data: bytes | bytearray | memoryview) -> None:
        pass

    def abort(self) -> None:
        pass


async def best_us(responses: int) -> float:
    loop = asyncio.get_running_loop()
    connection = Connection(read_timeout_s=10.0)
    connection.connection_made(_Silent())
    best = float("inf")
    for _ in range(5):
        start = time.process_time()
        for _ in range(responses):
            exchange = Exchange("http://a.test/", 10_000_000, None, False, float("inf"), loop)
            connection.exchange = exchange
            connection.data_received(RESPONSE)
            if exchange.error is not None or not exchange.done.done():
                raise SystemExit(f"the response was not read: {exchange.error}")
        best = min(best, (time.process_time() - start) / responses * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--responses", type=int, default=200_000)
    args = parser.parse_args()
    print(f"{asyncio.run(best_us(args.responses)):.2f} µs a response (best of 5)")


if __name__ == "__main__":
    main()
