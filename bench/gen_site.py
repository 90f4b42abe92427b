"""Generate the benchmark's static shop site: several hosts, deterministic from a seed.

Each host ``127.0.0.1N`` is a shop: a home page, an about page, paginated category listings
(20 products each) and product pages of 10-30 KB (``--small-pages``: 2-3 KB, the same links
and markup with a shorter description, so that 1,000,000 pages fit on a disk: ~3 GB). Pages carry ~30 links, most to pages already
seen (navigation, pagination, related products, other hosts), some to redirects
(``/r/<id>``, answered by nginx with a 301 to ``/p/<id>.html``), some to 404s
(``/missing/<n>.html``) and some to ``/private/``, which robots.txt disallows.

``manifest.json`` records, per host, the request paths a polite crawler must fetch exactly
once, split by the answer nginx gives (``ok`` 200, ``redirect`` 301, ``missing`` 404), and the
disallowed paths it must never fetch.

    python bench/gen_site.py --out bench/_work/site --pages 20000 --hosts 4 --port 18411
"""

from __future__ import annotations

import argparse
import json
import random
from collections import deque
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

PRODUCTS_PER_LISTING = 20
CATEGORIES = ("books", "music", "garden", "kitchen", "toys", "tools", "sports", "travel")
ROBOTS_TXT = "User-agent: *\nDisallow: /private/\n"
WORDS = [
    "amber",
    "bright",
    "copper",
    "delicate",
    "elegant",
    "fresh",
    "gentle",
    "handmade",
    "ivory",
    "jade",
    "keen",
    "lively",
    "mellow",
    "noble",
    "olive",
    "polished",
    "quiet",
    "rustic",
    "silver",
    "timber",
    "urban",
    "velvet",
    "woven",
    "yellow",
    "zesty",
    "crafted",
    "durable",
    "classic",
    "compact",
    "modern",
    "vintage",
    "organic",
    "premium",
    "rugged",
    "sturdy",
    "portable",
    "cosy",
    "smooth",
]


def host_ip(index: int) -> str:
    """The loopback address of host number ``index`` (0 -> 127.0.0.11)."""
    return f"127.0.0.{11 + index}"


@dataclass
class HostPlan:
    """The pages of one host and the links each one carries."""

    ip: str
    products: list[int]
    listings: dict[str, int]  # category -> number of listing pages
    pages: dict[str, list[str]] = field(default_factory=dict)  # path -> links (paths or URLs)
    redirects: set[str] = field(default_factory=set)
    missing: set[str] = field(default_factory=set)
    disallowed: set[str] = field(default_factory=set)


def listing_path(category: str, page: int) -> str:
    return f"/c/{category}/page-{page}.html"


def product_path(product_id: int) -> str:
    return f"/p/{product_id}.html"


def split_products(host_index: int, per_host_pages: int) -> tuple[list[int], dict[str, int]]:
    """Product ids of one host and listing-page counts per category, ~``per_host_pages`` pages."""
    fixed = 2  # home and about
    n_products = max(len(CATEGORIES), (per_host_pages - fixed) * PRODUCTS_PER_LISTING // 21)
    products = [host_index * 1_000_000 + i for i in range(n_products)]
    per_cat = -(-n_products // len(CATEGORIES))
    listings = {}
    for c, cat in enumerate(CATEGORIES):
        count = len(products[c * per_cat : (c + 1) * per_cat])
        listings[cat] = max(1, -(-count // PRODUCTS_PER_LISTING))
    return products, listings


def category_products(plan: HostPlan, category: str) -> list[int]:
    per_cat = -(-len(plan.products) // len(CATEGORIES))
    c = CATEGORIES.index(category)
    return plan.products[c * per_cat : (c + 1) * per_cat]


def nav_links() -> list[str]:
    return ["/", "/about.html"] + [listing_path(cat, 1) for cat in CATEGORIES]


def plan_host(
    rng: random.Random, index: int, hosts: list[str], port: int, per_host_pages: int
) -> HostPlan:
    products, listings = split_products(index, per_host_pages)
    plan = HostPlan(ip=hosts[index], products=products, listings=listings)
    others = [h for h in hosts if h != plan.ip]
    plan.pages["/"] = [*nav_links(), *(f"http://{h}:{port}/" for h in others), "/private/1.html"]
    plan.pages["/about.html"] = [*nav_links(), "/missing/about.html"]
    plan.disallowed.add("/private/1.html")
    plan.missing.add("/missing/about.html")
    product_home: dict[int, str] = {}
    for cat, n_pages in listings.items():
        items = category_products(plan, cat)
        for page in range(1, n_pages + 1):
            chunk = items[(page - 1) * PRODUCTS_PER_LISTING : page * PRODUCTS_PER_LISTING]
            links = nav_links() + [product_path(p) for p in chunk]
            near = {1, n_pages, page - 1, page + 1, page - 2, page + 2}
            links += [listing_path(cat, n) for n in sorted(near) if 1 <= n <= n_pages]
            plan.pages[listing_path(cat, page)] = links
            for p in chunk:
                product_home[p] = listing_path(cat, page)
    add_products(rng, plan, product_home, hosts, port)
    return plan


def add_products(
    rng: random.Random,
    plan: HostPlan,
    product_home: dict[int, str],
    hosts: list[str],
    port: int,
) -> None:
    """Add every product page of ``plan`` with its related, cross-host and odd links."""
    others = [i for i, ip in enumerate(hosts) if ip != plan.ip]
    n_products = len(plan.products)  # every host has as many, numbered from index * 1e6
    for p in plan.products:
        path = product_path(p)
        links = [*nav_links(), product_home[p], f"{path}#reviews"]
        links += [product_path(q) for q in rng.sample(plan.products, 14)]
        for _ in range(2):
            other = rng.choice(others)
            q = other * 1_000_000 + rng.randrange(n_products)
            links.append(f"http://{hosts[other]}:{port}{product_path(q)}")
        roll = rng.random()
        if roll < 0.10:
            target = rng.choice(plan.products)
            plan.redirects.add(f"/r/{target}")
            links.append(f"/r/{target}")
        elif roll < 0.15:
            missing = f"/missing/{rng.randrange(400)}.html"
            plan.missing.add(missing)
            links.append(missing)
        elif roll < 0.20:
            private = f"/private/{rng.randrange(200)}.html"
            plan.disallowed.add(private)
            links.append(private)
        plan.pages[path] = links


def render_links(links: list[str]) -> str:
    return "\n".join(f'<li><a href="{escape(u)}">{escape(link_text(u))}</a></li>' for u in links)


def link_text(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1].replace(".html", "") or "home"


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choices(WORDS, k=n))


def render_page(rng: random.Random, plan: HostPlan, path: str, *, small: bool = False) -> str:
    links = plan.pages[path]
    head = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(link_text(path))} | shop {plan.ip}</title></head><body>\n"
        f'<nav class="top"><ul>{render_links(links[:10])}</ul></nav>\n'
    )
    if path.startswith("/p/"):
        product_id = path[3:-5]
        description_words = rng.randint(1_300, 4_200)  # ~7 bytes a word: 10-30 KB pages
        if small:
            description_words //= 30  # 45-140 words: 2-3 KB pages
        body = (
            f'<article class="product" data-product_id="{product_id}">\n'
            f'<h1 class="name">{words(rng, 3).title()} {product_id}</h1>\n'
            f'<p class="price">£{rng.randint(100, 99_999) / 100:.2f}</p>\n'
            f'<div class="description"><p>{words(rng, description_words)}</p></div>\n'
            f'<section class="related"><ul>{render_links(links[10:])}</ul></section>\n'
            "</article>\n"
        )
    else:
        body = (
            f"<main><h1>{escape(link_text(path)).title()}</h1>\n"
            f"<p>{words(rng, rng.randint(150, 400) // (30 if small else 1))}</p>\n"
            f'<ul class="listing">{render_links(links[10:])}</ul></main>\n'
        )
    return head + body + "<footer>static benchmark site</footer></body></html>\n"


def resolve(link: str, host: str, port: int) -> tuple[str, str]:
    """(host, path) of a link: absolute URLs name their host, the fragment is dropped."""
    prefix = "http://"
    if link.startswith(prefix):
        hostport, _, rest = link[len(prefix) :].partition("/")
        return hostport.split(":")[0], "/" + rest.split("#")[0]
    return host, link.split("#")[0]


def check_reachable(plans: dict[str, HostPlan], port: int) -> None:
    """Raise unless every page of every host is reachable from the first host's home page."""
    seen = {(next(iter(plans)), "/")}
    queue = deque(seen)
    while queue:
        host, path = queue.popleft()
        for link in plans[host].pages.get(path, []):
            target = resolve(link, host, port)
            if target not in seen:
                seen.add(target)
                queue.append(target)
    for ip, plan in plans.items():
        unreached = [p for p in plan.pages if (ip, p) not in seen]
        if unreached:
            raise SystemExit(f"{ip}: {len(unreached)} pages unreachable, e.g. {unreached[:3]}")


def write_site(
    out: Path, plans: dict[str, HostPlan], port: int, seed: int, *, small: bool = False
) -> dict[str, Any]:
    manifest: dict[str, Any] = {"port": port, "seed": seed, "small_pages": small, "hosts": {}}
    for ip, plan in plans.items():
        rng = random.Random(f"{seed}-{ip}-text")
        root = out / ip
        for path in plan.pages:
            file = root / ("index.html" if path == "/" else path.lstrip("/"))
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text(render_page(rng, plan, path, small=small), encoding="utf-8")
        (root / "robots.txt").write_text(ROBOTS_TXT, encoding="ascii")
        manifest["hosts"][ip] = {
            "ok": sorted(plan.pages),
            "redirect": sorted(plan.redirects),
            "missing": sorted(plan.missing),
            "disallowed": sorted(plan.disallowed),
            "products": len(plan.products),
        }
    manifest["seeds"] = [f"http://{ip}:{port}/" for ip in plans]
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    return manifest


def generate(
    out: Path, pages: int, n_hosts: int, port: int, seed: int, *, small: bool = False
) -> dict[str, Any]:
    """Write the site under ``out/<ip>/`` and return its manifest."""
    rng = random.Random(seed)
    hosts = [host_ip(i) for i in range(n_hosts)]
    per_host = max(len(CATEGORIES) * 3, pages // n_hosts)
    plans = {hosts[i]: plan_host(rng, i, hosts, port, per_host) for i in range(n_hosts)}
    check_reachable(plans, port)
    return write_site(out, plans, port, seed, small=small)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench/_work/site"))
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--hosts", type=int, default=4, choices=range(2, 10))
    parser.add_argument("--port", type=int, default=18411)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--small-pages", action="store_true", help="2-3 KB product pages")
    args = parser.parse_args()
    manifest = generate(
        args.out, args.pages, args.hosts, args.port, args.seed, small=args.small_pages
    )
    hosts = manifest["hosts"]
    total = sum(len(h["ok"]) for h in hosts.values())
    print(f"wrote {total} pages on {len(hosts)} hosts under {args.out}")


if __name__ == "__main__":
    main()
