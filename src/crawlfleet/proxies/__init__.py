"""The proxy pool of a crawl: endpoints in tiers, their shared health, quarantine and rotation."""

from crawlfleet.proxies.endpoints import DIRECT, ProxyEndpoint, load_tiers, proxy_id
from crawlfleet.proxies.pool import ProxyPool
from crawlfleet.proxies.protocols import ProxyState, ProxyStateStore

__all__ = [
    "DIRECT",
    "ProxyEndpoint",
    "ProxyPool",
    "ProxyState",
    "ProxyStateStore",
    "load_tiers",
    "proxy_id",
]
