"""Generate a documentation-like site: one host, few pages, each large and full of links.

The shape of a Sphinx/MkDocs site, the second site of issue 11 (529 pages of ~96 KB): every
page carries the whole table of contents in its sidebar (one link per page), a body of
~45 KB of prose and code with ~20 links to other pages and to its own sections, previous/next
links, a "show source" link into ``/_sources/`` (which robots.txt disallows) and an "edit"
link to another site. The same manifest as ``gen_site.py`` (no products), so
``crawl_bench.py --docs`` checks a crawl of it the same way.

    python bench/gen_docs.py --out bench/_work/docs-site --pages 529 --port 18413
"""

from __future__ import annotations

import argparse
import json
import random
from html import escape
from pathlib import Path
from typing import Any

from gen_site import WORDS, host_ip

ROBOTS_TXT = "User-agent: *\nDisallow: /_sources/\n"
SECTIONS = ("tutorial", "guide", "reference", "howto", "api", "internals", "faq", "changes")
BODY_WORDS = 6_000  # ~45 KB of prose and code


def page_paths(pages: int) -> list[str]:
    paths = ["/"]
    for n in range(1, pages):
        paths.append(f"/{SECTIONS[n % len(SECTIONS)]}/page-{n:04d}.html")
    return paths


def title(path: str) -> str:
    return "Home" if path == "/" else path.rsplit("/", 1)[1][:-5].replace("-", " ").title()


def prose(rng: random.Random, count: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(count))


def render(rng: random.Random, paths: list[str], index: int) -> str:
    path = paths[index]
    source = "/_sources/index.txt" if path == "/" else f"/_sources{path[:-5]}.txt"
    toc = "".join(
        f'<li class="toctree-l1"><a class="reference internal" href="{p}">{escape(title(p))}'
        "</a></li>"
        for p in paths
    )
    body, written, section = [], 0, 0
    while written < BODY_WORDS:
        section += 1
        count = rng.randint(120, 400)
        target = rng.choice(paths)
        body.append(
            f'<section id="section-{section}"><h2>{prose(rng, 3).title()}'
            f'<a class="headerlink" href="#section-{section}">¶</a></h2>'
            f'<p>{prose(rng, count)} see <a class="reference internal" href="{target}">'
            f"{escape(title(target))}</a> and "
            f'<a href="#section-{max(1, section - 1)}">the section above</a>.</p>'
            f'<div class="highlight"><pre>{prose(rng, 40)}</pre></div></section>'
        )
        written += count + 43
    neighbours = [paths[(index - 1) % len(paths)], paths[(index + 1) % len(paths)]]
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{escape(title(path))} — benchmark docs</title>"
        '<link rel="stylesheet" href="/_static/theme.css"><script src="/_static/doc.js"></script>'
        "</head><body>"
        f'<nav class="sidebar"><ul>{toc}</ul></nav>'
        f'<div class="document"><h1>{escape(title(path))}</h1>{"".join(body)}</div>'
        f'<footer><a href="{neighbours[0]}" rel="prev">Previous</a> '
        f'<a href="{neighbours[1]}" rel="next">Next</a> '
        f'<a href="{source}" rel="nofollow">Show source</a> '
        f'<a href="https://github.com/example/docs/edit/main{path}">Edit</a></footer>'
        "</body></html>\n"
    )


def generate(out: Path, pages: int, port: int, seed: int) -> dict[str, Any]:
    """Write the site under ``out/<ip>/`` and return its manifest."""
    rng = random.Random(seed)
    ip = host_ip(0)
    paths = page_paths(pages)
    root = out / ip
    for index, path in enumerate(paths):
        file = root / ("index.html" if path == "/" else path.lstrip("/"))
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(render(rng, paths, index), encoding="utf-8")
    (root / "robots.txt").write_text(ROBOTS_TXT, encoding="ascii")
    sources = ["/_sources/index.txt"] + [f"/_sources{p[:-5]}.txt" for p in paths[1:]]
    manifest: dict[str, Any] = {
        "port": port,
        "seed": seed,
        "small_pages": False,
        "kind": "docs",
        "hosts": {
            ip: {
                "ok": sorted(paths),
                "redirect": [],
                "missing": [],
                "disallowed": sources,
                "products": 0,
            }
        },
        "seeds": [f"http://{ip}:{port}/"],
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    return manifest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench/_work/docs-site"))
    parser.add_argument("--pages", type=int, default=529)
    parser.add_argument("--port", type=int, default=18413)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    manifest = generate(args.out, args.pages, args.port, args.seed)
    total = sum(len(h["ok"]) for h in manifest["hosts"].values())
    print(f"wrote {total} pages under {args.out}")


if __name__ == "__main__":
    main()
