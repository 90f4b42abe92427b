"""Corpus benchmark: crawlfleet, Scrapy, spider-rs and Crawlee on real documentation sites.

The distribution's documentation packages (Sphinx, javadoc, rustdoc + mdBook HTML that nobody
here wrote) are served as static sites by the private nginx, one loopback IP each, with a
robots.txt written here. The ground truth of each site comes from its files
(``corpus_truth.py``: another HTML parser and URL resolver than crawlfleet's); every crawl is
checked against it from nginx's access log. The crawlers run one at a time, alternately, with
64 concurrent requests, no delay and robots.txt obeyed; per run: pages/s (responses in the
access log / wall seconds), CPU ms a page and peak RSS of the crawler's process tree
(``measure.py``) and the exactness (required URLs fetched once, optional at most once, nothing
else, nothing robots.txt disallows).

    .venv/bin/python bench/corpus_bench.py                          # every corpus and tool, 1 run
    .venv/bin/python bench/corpus_bench.py --corpora python-docs --tools crawlfleet scrapy
    .venv/bin/python bench/corpus_bench.py --corpora rustdoc --tools crawlfleet --profile

The distributed tools (``crawlfleet-dist1``, ``crawlfleet-dist2``: N ``crawlfleet worker``
processes and the dispatcher; ``scrapy-redis2``: two scrapy-redis processes) run against a
private redis-server and PostgreSQL started for the whole run (``distributed_runs.py``, as
``distributed_speed.py`` runs them); their CPU is that of the whole system (crawler processes,
redis-server, PostgreSQL). With any of them the table goes to its own section of RESULTS.md:

    .venv/bin/python bench/corpus_bench.py --corpora javadoc --runs 2 \
        --tools crawlfleet crawlfleet-dist1 crawlfleet-dist2 scrapy-redis2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.fixtures
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))  # this checkout's

import corpus_truth
from corpus_truth import Robots, Truth, request_key
from distributed_runs import Cluster, Measured, Services, run_cluster, run_scrapy_redis
from distributed_runs import start_services as start_cluster_services
from machine import busy_cpu_s, describe_machine
from measure import ProcessUsage, run_measured
from nginx_server import LogLine, NginxServer, read_log
from profile_crawl import summarize
from results import write_section

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
WORK = BENCH / "_work"
CORPUS_WORK = WORK / "corpus"
SCRAPY_PYTHON = WORK / "scrapy-venv" / "bin" / "python"
CRAWLEE_PYTHON = WORK / "crawlee-venv" / "bin" / "python"
SPIDER_RS_DIR = WORK / "spider-rs"
TOOLS = ("crawlfleet", "scrapy", "spider-rs", "crawlee")
DISTRIBUTED = ("crawlfleet-dist1", "crawlfleet-dist2", "scrapy-redis2")  # need Redis, PostgreSQL
CONCURRENCY = 64
# Frames every stack starts with (interpreter start, CLI, thread pool, event loop): dropped
# from the profile so that its inclusive shares rank the crawl's own work.
ENTRY_FRAMES = (
    "<frozen runpy>",
    "(threading.py:",
    "futures/thread.py:",
    "typer/",
    "asyncio/runners.py:",
    "asyncio/base_events.py:",
    "asyncio/events.py:",
    "crawlfleet/__main__.py:",
)
TRUTH_VERSION = 1  # bump when corpus_truth's reading of a site changes


@dataclass(frozen=True)
class Corpus:
    """One documentation package served as a site of its own."""

    name: str
    generator: str
    package: str
    root: Path
    seed_path: str
    ip: str
    disallow: tuple[str, ...]  # real paths of the site, so robots.txt has something to forbid


CORPORA = {
    c.name: c
    for c in (
        Corpus(
            "python-docs",
            "Sphinx",
            "python3.11-doc",
            Path("/usr/share/doc/python3.11/html"),
            "/",
            "127.0.0.21",
            ("/distutils/", "/whatsnew/2."),
        ),
        Corpus(
            "javadoc",
            "javadoc",
            "openjdk-17-doc",
            Path("/usr/share/doc/openjdk-17-jre-headless"),
            "/api/index.html",
            "127.0.0.22",
            ("/api/java.desktop/javax/swing/plaf/", "/specs/man/"),
        ),
        Corpus(
            "rustdoc",
            "rustdoc + mdBook",
            "rust-doc",
            Path("/usr/share/doc/rust-doc/html"),
            "/",
            "127.0.0.23",
            ("/src/", "/nomicon/"),
        ),
    )
}


@dataclass(frozen=True)
class Exactness:
    """One crawl's requests (nginx's access log) against the ground truth."""

    responses: int
    required: int
    required_fetched: int
    missed: int
    duplicates: int  # extra fetches of a required or optional URL (3 fetches add 2)
    optional_fetched: int
    optional: int
    robots_violations: int
    unexpected: int
    robots_fetches: int
    examples: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return (
            self.missed == 0
            and self.duplicates == 0
            and self.robots_violations == 0
            and self.unexpected == 0
            and self.robots_fetches >= 1
        )

    def summary(self) -> str:
        return (
            f"{self.required_fetched}/{self.required} required URLs, {self.missed} missed, "
            f"{self.duplicates} duplicate fetches, {self.optional_fetched}/{self.optional} "
            f"optional, {self.unexpected} unexpected, {self.robots_violations} robots.txt "
            f"violations, robots.txt fetched {self.robots_fetches}x"
        )


@dataclass(frozen=True)
class RunResult:
    corpus: str
    tool: str
    run: int
    usage: ProcessUsage
    exact: Exactness
    others_cpu_s: float  # CPU the rest of the machine (nginx included) used during the run
    load_1m: float  # the machine's 1-minute load average when the run started
    # The distributed tools: redis-server's and PostgreSQL's CPU during the run (counted in
    # the CPU a page) and the rest of what the run measured (``usage`` then holds the
    # crawler processes' CPU, user and sys together, as ``user_s``).
    services_cpu_s: float = 0.0
    measured: Measured | None = None

    @property
    def pages_per_s(self) -> float:
        return self.exact.responses / self.usage.wall_s

    @property
    def cpu_ms_per_page(self) -> float:
        return 1000 * (self.usage.cpu_s + self.services_cpu_s) / max(1, self.exact.responses)


def check(truth: Truth, robots: Robots, log: list[LogLine]) -> Exactness:
    """Compare the access log of one crawl with the truth (see corpus_truth's docstring)."""
    counts = Counter(request_key(line.uri) for line in log)
    robots_fetches = counts.pop("/robots.txt", 0)
    missed = sorted(k for k in truth.required if counts[k] == 0)
    dups = sorted(
        k for k in counts if counts[k] > 1 and (k in truth.required or k in truth.optional)
    )
    violations = sorted(k for k in counts if robots.forbids(k))
    unexpected = sorted(
        k
        for k in counts
        if k not in truth.required and k not in truth.optional and not robots.forbids(k)
    )
    examples = [f"missed {k}" for k in missed[:5]]
    examples += [f"dup x{counts[k]} {k}" for k in dups[:5]]
    examples += [f"robots.txt violation {k}" for k in violations[:5]]
    examples += [f"unexpected {k}" for k in unexpected[:5]]
    return Exactness(
        responses=len(log),
        required=len(truth.required),
        required_fetched=len(truth.required) - len(missed),
        missed=len(missed),
        duplicates=sum(counts[k] - 1 for k in dups),
        optional_fetched=sum(1 for k in truth.optional if counts[k]),
        optional=len(truth.optional),
        robots_violations=sum(counts[k] for k in violations),
        unexpected=sum(counts[k] for k in unexpected),
        robots_fetches=robots_fetches,
        examples=tuple(examples),
    )


def package_version(package: str) -> str:
    done = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Version}", package], capture_output=True, text=True
    )
    return done.stdout.strip() if done.returncode == 0 else ""


def prepare(corpus: Corpus, port: int) -> Truth:
    """The site directory nginx serves (the package's files linked, our robots.txt) and the
    ground truth, cached in bench/_work/corpus/ per package version and robots.txt."""
    version = package_version(corpus.package)
    if not version or not corpus.root.is_dir():
        sys.exit(f"{corpus.name}: install {corpus.package} first (see bench/README.md)")
    site = CORPUS_WORK / "site" / corpus.ip
    shutil.rmtree(site, ignore_errors=True)
    site.mkdir(parents=True)
    for entry in corpus.root.iterdir():
        if entry.name != "robots.txt":  # rust-doc ships one; ours replaces it
            (site / entry.name).symlink_to(entry.resolve())
    robots = Robots(corpus.disallow)
    (site / "robots.txt").write_text(robots.text())
    cache = CORPUS_WORK / f"truth-{corpus.name}.json"
    stamp = {"version": version, "robots": robots.text(), "truth": TRUTH_VERSION}
    stamp |= {"seed": corpus.seed_path, "ip": corpus.ip, "port": port}
    if cache.exists():
        saved = json.loads(cache.read_text())
        if saved["stamp"] == stamp:
            return Truth(**saved["truth"] | {"disallowed_linked": set(saved["disallowed"])})
    print(f"{corpus.name}: computing the ground truth from {corpus.root} ...", flush=True)
    truth = corpus_truth.compute(corpus.root, corpus.seed_path, robots, f"{corpus.ip}:{port}")
    fields = {k: v for k, v in asdict(truth).items() if k != "disallowed_linked"}
    record = {"stamp": stamp, "truth": fields, "disallowed": sorted(truth.disallowed_linked)}
    cache.write_text(json.dumps(record))
    return truth


def command(
    tool: str, corpus: Corpus, seed: str, run_dir: Path, max_pages: int, python: Path
) -> list[str]:
    """The crawler's argv: same seed, concurrency, no delay, robots.txt obeyed, a page bound."""
    if tool == "crawlfleet":
        config = run_dir / "crawl.toml"
        config.write_text(f'[crawl]\nallowed_domains = ["{corpus.ip}"]\n')
        argv = ["env", f"PYTHONPATH={REPO / 'src'}", str(python), "-m"]
        argv += ["crawlfleet", "crawl", seed, "--config", str(config)]
        argv += ["--concurrency", str(CONCURRENCY), "--per-domain-concurrency", str(CONCURRENCY)]
        argv += ["--delay", "0", "--allow-private-addresses", "--max-pages", str(max_pages)]
        argv += ["--state", str(run_dir / "state"), "--fresh", "-o", str(run_dir / "items.jsonl")]
        return [*argv, "--parsers", str(BENCH / "bench_parsers.py")]
    if tool == "scrapy":
        argv = [str(SCRAPY_PYTHON), str(BENCH / "scrapy_spider.py")]
        return [*argv, "--out", str(run_dir / "items.jsonl"), "--max-pages", str(max_pages), seed]
    if tool == "spider-rs":
        node = ["env", f"NODE_PATH={SPIDER_RS_DIR / 'node_modules'}", "node"]
        return [*node, str(BENCH / "spider_rs_crawl.js"), seed, str(max_pages)]
    storage = f"CRAWLEE_STORAGE_DIR={run_dir / 'crawlee-storage'}"
    argv = ["env", storage, str(CRAWLEE_PYTHON), str(BENCH / "crawlee_http.py")]
    return [*argv, "--concurrency", str(CONCURRENCY), "--max-pages", str(max_pages), seed]


def compile_tree(python: Path) -> None:
    """Byte-compile this tree's ``src/`` once: crawlfleet runs from it as an installed package
    does (pip compiles on install, as Scrapy's and Crawlee's venvs are), not compiling ~200
    modules at every start (~0.13 s of CPU a crawl where ``PYTHONDONTWRITEBYTECODE`` is set)."""
    subprocess.run([str(python), "-m", "compileall", "-q", str(REPO / "src")], check=True)


def max_pages_of(truth: Truth) -> int:
    """The request bound of a run: what the truth allows plus a margin to see a runaway."""
    return (len(truth.required) + len(truth.optional)) * 12 // 10 + 100


def run_distributed(
    corpus: Corpus,
    truth: Truth,
    tool: str,
    run_dir: Path,
    svc: Services,
    args: argparse.Namespace,
) -> tuple[list[str], Measured]:
    """One run of a distributed tool on ``corpus``; its argv (the dispatcher's, or a
    scrapy-redis process's) and figures."""
    name = run_dir.name
    if tool == "scrapy-redis2":
        spider = [str(SCRAPY_PYTHON), str(BENCH / "scrapy_redis_spider.py")]
        spider += ["--idle-s", str(args.idle_s), corpus.ip]
        key = name.replace("-", "")
        measured = run_scrapy_redis(
            spider, svc, run_dir, key, [truth.seed], timeout_s=args.timeout_s
        )
        return spider, measured
    config = run_dir / "crawl.toml"
    config.write_text(f'[crawl]\nallowed_domains = ["{corpus.ip}"]\n')
    crawlfleet = ["env", f"PYTHONPATH={REPO / 'src'}", str(args.crawlfleet_python), "-m"]
    crawlfleet.append("crawlfleet")
    spy = (
        (args.py_spy or Path(args.crawlfleet_python).parent / "py-spy")
        if args.profile_workers
        else None
    )
    cluster = Cluster(crawlfleet, BENCH / "bench_parsers.py", py_spy=spy)
    crawl_args = [truth.seed, "--config", str(config)]
    crawl_args += ["--concurrency", str(CONCURRENCY), "--per-domain-concurrency", str(CONCURRENCY)]
    crawl_args += ["--delay", "0", "--allow-private-addresses", "--max-pages"]
    crawl_args.append(str(max_pages_of(truth)))
    measured, _ = run_cluster(
        cluster, svc, run_dir, name, crawl_args, workers=int(tool[-1]), timeout_s=args.timeout_s
    )
    return [*crawlfleet, "crawl", *crawl_args], measured


def run_once(
    corpus: Corpus,
    truth: Truth,
    tool: str,
    run: int,
    nginx: NginxServer,
    args: argparse.Namespace,
    svc: Services | None,
) -> RunResult:
    run_dir = CORPUS_WORK / "runs" / f"{corpus.name}-{tool}-{run}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    nginx.clear_log()
    load_1m = os.getloadavg()[0]
    measured = None
    if tool in DISTRIBUTED:
        assert svc is not None
        argv, measured = run_distributed(corpus, truth, tool, run_dir, svc, args)
        others_cpu_s = measured.others_cpu_s
        usage = ProcessUsage(
            wall_s=measured.wall_s,
            user_s=measured.crawler_cpu_s,
            sys_s=0.0,
            peak_rss_mb=max(measured.worker_rss_mb, default=0.0),
            exit_code=measured.exit_code,
            timed_out=measured.timed_out,
        )
    else:
        argv = command(
            tool, corpus, truth.seed, run_dir, max_pages_of(truth), args.crawlfleet_python
        )
        busy_before_s = busy_cpu_s()
        usage = run_measured(argv, timeout_s=args.timeout_s, log_path=run_dir / "output.log")
        others_cpu_s = busy_cpu_s() - busy_before_s - usage.cpu_s
    shutil.copy(nginx.access_log, run_dir / "access.log")
    lines = [line for line in read_log(nginx.access_log) if line.host == corpus.ip]
    exact = check(truth, Robots(corpus.disallow), lines)
    services_cpu_s = measured.redis_cpu_s + measured.postgres_cpu_s if measured else 0.0
    result = RunResult(
        corpus.name, tool, run, usage, exact, others_cpu_s, load_1m, services_cpu_s, measured
    )
    record = {"corpus": corpus.name, "tool": tool, "run": run, "argv": argv}
    record |= {"others_cpu_s": others_cpu_s, "load_1m": load_1m}
    record |= {"usage": asdict(usage), "exactness": asdict(exact)}
    if measured is not None:
        record |= {"distributed": asdict(measured)}
    (run_dir / "result.json").write_text(json.dumps(record, indent=1))
    status = "TIMED OUT" if usage.timed_out else f"exit {usage.exit_code}"
    print(
        f"{corpus.name:11} {tool:10} run {run}: {exact.responses} responses in "
        f"{usage.wall_s:.1f} s = {result.pages_per_s:.1f} pages/s, {usage.cpu_s:.1f} CPU s "
        f"({result.cpu_ms_per_page:.2f} ms/page), peak RSS {usage.peak_rss_mb:.0f} MB, {status}; "
        f"others used {others_cpu_s:.1f} CPU s meanwhile, load {load_1m:.1f} at start"
        + (f"\n{'':12}{distributed_details(measured)}" if measured else "")
        + f"\n{'':12}{'EXACT' if exact.ok else 'NOT EXACT'}: {exact.summary()}"
        + "".join(f"\n{'':14}{e}" for e in exact.examples)
        + ("" if exact.ok else f"\n{'':12}the crawler's last words: {last_lines(run_dir)}"),
        flush=True,
    )
    return result


def distributed_details(m: Measured) -> str:
    """The split of a distributed run's CPU, its Redis traffic and PostgreSQL commits."""
    top = sorted(m.commands.items(), key=lambda kv: -kv[1])[:6]
    text = (
        f"CPU {m.crawler_cpu_s:.1f} s crawler processes (dispatcher {m.dispatcher_cpu_s:.1f} s)"
        f" + {m.redis_cpu_s:.1f} s Redis + {m.postgres_cpu_s:.1f} s PostgreSQL; Redis calls: "
        + ", ".join(f"{k} {v}" for k, v in top)
        + f"; {m.redis_reads} reads (round trips)"
    )
    if m.postgres_commits:
        voluntary, preempted = m.worker_switches
        text += (
            f"; PostgreSQL {m.postgres_commits} commits; workers' context switches "
            f"{voluntary} voluntary, {preempted} preempted; {m.expired} expired leases"
        )
    return text


def last_lines(run_dir: Path, count: int = 3) -> str:
    """The crawler's own closing lines (its summary), to set beside a failed check: the
    crawler's log, the dispatcher's, or the first scrapy-redis process's."""
    names = ("output.log", "dispatcher.log", "scrapy-0.log")
    log = next((run_dir / n for n in names if (run_dir / n).exists()), None)
    if log is None:
        return "(no log)"
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return " / ".join(line[:200] for line in lines[-count:])


def profile(corpus: Corpus, truth: Truth, nginx: NginxServer, args: argparse.Namespace) -> str:
    """One more crawlfleet crawl of ``corpus`` under ``py-spy record --threads``; its top."""
    spy = Path(args.crawlfleet_python).parent / "py-spy"
    if not spy.exists():
        sys.exit(f"--profile needs py-spy next to {args.crawlfleet_python} (pip install py-spy)")
    out = CORPUS_WORK / "profile" / corpus.name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    crawl = command(
        "crawlfleet", corpus, truth.seed, out, max_pages_of(truth), args.crawlfleet_python
    )
    raw = out / "samples.txt"
    argv = [str(spy), "record", "--threads", "--rate", "200", "--subprocesses"]
    argv += ["--format", "raw", "-o", str(raw), "--", *crawl]
    nginx.clear_log()
    done = subprocess.run(argv, timeout=args.timeout_s, capture_output=True, check=False)
    if done.returncode != 0 or not raw.exists():
        return f"py-spy failed (exit {done.returncode}): {done.stderr.decode()[-500:]}"
    # --threads puts the thread's frame first on each stack: count it, then drop it and the
    # entry frames every thread starts with, so the shares below are of real work.
    lines, threads = [], Counter[str]()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        threads[frames[1].partition(": ")[2] or frames[1]] += int(count)
        kept = [f for f in frames[2:] if not any(entry in f for entry in ENTRY_FRAMES)]
        lines.append(";".join([frames[0], *kept]) + " " + count)
    merged = out / "samples-merged.txt"
    merged.write_text("\n".join(lines) + "\n")
    total = sum(threads.values()) or 1
    by_thread = ", ".join(f"{name} {100 * n / total:.0f}%" for name, n in threads.most_common(6))
    return f"samples by thread: {by_thread}\n" + summarize(merged, args.top)


def median(results: list[RunResult], corpus: str, tool: str, key: str) -> float | None:
    values = []
    for r in results:
        if r.corpus == corpus and r.tool == tool:
            value: object = r
            for part in key.split("."):
                value = getattr(value, part)
            values.append(float(value))  # type: ignore[arg-type]
    return statistics.median(values) if values else None


def table(results: list[RunResult], corpora: list[Corpus], tools: list[str]) -> str:
    head = (
        "| corpus | tool | pages/s | CPU ms/page | peak RSS MB | wall s | responses | "
        "exact | missed | dup | extra | robots viol. | others' CPU s, load |"
    )
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    for corpus in corpora:
        for tool in tools:
            for r in (r for r in results if r.corpus == corpus.name and r.tool == tool):
                e = r.exact
                lines.append(
                    f"| {corpus.name} | {tool} | {r.pages_per_s:.1f} | {r.cpu_ms_per_page:.2f} | "
                    f"{r.usage.peak_rss_mb:.0f} | {r.usage.wall_s:.1f} | {e.responses} | "
                    f"{'yes' if e.ok else 'NO'} {e.required_fetched}/{e.required} | {e.missed} | "
                    f"{e.duplicates} | {e.unexpected} | {e.robots_violations} | "
                    f"{r.others_cpu_s:.1f}, {r.load_1m:.1f} |"
                )
    lines += ["", ratios(results, corpora, tools)]
    return "\n".join(lines)


def ratios(results: list[RunResult], corpora: list[Corpus], tools: list[str]) -> str:
    """crawlfleet against each other tool, medians, with issue 34's targets."""
    rows = ["| corpus | tool | vs | pages/s | CPU a page | peak RSS | target |"]
    rows.append("| --- | --- | --- | --- | --- | --- | --- |")
    for corpus in corpora:
        for ours, theirs, target in PAIRS:
            if ours not in tools or theirs not in tools:
                continue
            cells = []
            for key in KEYS:
                mine = median(results, corpus.name, ours, key)
                other = median(results, corpus.name, theirs, key)
                cells.append(f"{mine / other:.2f}x" if mine is not None and other else "n/a")
            rows.append(
                f"| {corpus.name} | {ours} | {theirs} | " + " | ".join(cells) + f" | {target} |"
            )
    rss = [r.usage.peak_rss_mb for r in results if r.tool == "crawlfleet"]
    if rss:
        rows.append(f"\ncrawlfleet's largest peak RSS: {max(rss):.0f} MB (target ≤ 250 MB).")
    return "\n".join(rows)


KEYS = ("pages_per_s", "cpu_ms_per_page", "usage.peak_rss_mb")
# The ratios the table gives (medians), with issue 34's targets.
PAIRS = (
    ("crawlfleet", "scrapy", "≥ 10x pages/s, ≤ 0.1x CPU a page"),
    ("crawlfleet", "spider-rs", "CPU a page ≤ 1.5x"),
    ("crawlfleet", "crawlee", "≥ 5x pages/s"),
    ("crawlfleet-dist1", "crawlfleet", "≥ 0.9x pages/s"),
    ("crawlfleet-dist2", "scrapy-redis2", "≥ 5x pages/s"),
    ("crawlfleet-dist2", "crawlfleet", ""),
)


def versions() -> str:
    def out(argv: list[str]) -> str:
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        except OSError:
            return "n/a"
        return done.stdout.strip() or "n/a"

    spider = SPIDER_RS_DIR / "node_modules" / "@spider-rs" / "spider-rs" / "package.json"
    spider_version = json.loads(spider.read_text())["version"] if spider.exists() else "n/a"
    crawlee = out([str(CRAWLEE_PYTHON), "-c", "import crawlee; print(crawlee.__version__)"])
    node = out(["node", "--version"])
    return (
        f"spider-rs {spider_version} (npm, linux-x64-gnu build) on node {node}; Crawlee {crawlee}"
    )


def main() -> None:
    args = parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so nginx is stopped on the way out
    corpora = [CORPORA[name] for name in args.corpora]
    missing = {
        "scrapy": SCRAPY_PYTHON,
        "crawlee": CRAWLEE_PYTHON,
        "spider-rs": SPIDER_RS_DIR / "node_modules" / "@spider-rs" / "spider-rs",
    }
    missing["scrapy-redis2"] = SCRAPY_PYTHON
    for tool in args.tools:
        if tool in missing and not missing[tool].exists():
            sys.exit(f"{tool}: nothing at {missing[tool]}; see bench/README.md (one-time setup)")
    machine = describe_machine()
    if any(t.startswith("crawlfleet") for t in args.tools):
        compile_tree(args.crawlfleet_python)
    truths = {c.name: prepare(c, args.port) for c in corpora}
    for corpus in corpora:
        print(
            f"{corpus.name} ({corpus.generator}, {corpus.package} {package_version(corpus.package)}, "
            f"seed {truths[corpus.name].seed}): {truths[corpus.name].summary()}",
            flush=True,
        )
    results: list[RunResult] = []
    profiles: dict[str, str] = {}
    nginx = NginxServer(
        CORPUS_WORK / "site",
        CORPUS_WORK / "nginx",
        [c.ip for c in corpora],
        args.port,
        gzip=args.gzip,
    )
    distributed = [t for t in args.tools if t in DISTRIBUTED]
    svc = start_cluster_services(CORPUS_WORK, nginx) if distributed else None
    if svc is None:
        nginx.start()
    try:
        for corpus in corpora:
            for run in range(1, args.runs + 1):
                for tool in args.tools:
                    truth = truths[corpus.name]
                    results.append(run_once(corpus, truth, tool, run, nginx, args, svc))
            if args.profile:
                profiles[corpus.name] = profile(corpus, truths[corpus.name], nginx, args)
                print(
                    f"\nprofile of crawlfleet on {corpus.name}:\n{profiles[corpus.name]}",
                    flush=True,
                )
    finally:
        if svc is not None:
            svc.stop()
        else:
            nginx.stop()
    text = table(results, corpora, args.tools)
    print("\n" + text)
    if args.no_results:
        return
    sites = "\n".join(
        f"- **{c.name}**: {c.generator}, Debian's `{c.package}` {package_version(c.package)} "
        f"({c.root}), seed `{c.seed_path}`, robots.txt `Disallow: {'`, `'.join(c.disallow)}`. "
        f"Ground truth: {truths[c.name].summary()}."
        for c in corpora
    )
    rerun = "    .venv/bin/python bench/corpus_bench.py " + " ".join(sys.argv[1:])
    section, title = "corpus", "Corpus: real documentation sites"
    if distributed:
        section, title = "corpus-distributed", "Distributed on the corpora"
    if args.gzip:
        section, title = f"{section}-gzip", f"{title}, sent gzip-compressed"
    body = (
        f"## {title}\n\n"
        f"{machine}{f' {versions()}.' if {'spider-rs', 'crawlee'} & set(args.tools) else ''}\n\n"
        f"{sites}\n\n"
        + (
            "nginx sends the HTML gzip-compressed (level 1), as most servers do.\n\n"
            if args.gzip
            else ""
        )
        + f"Each crawler: {CONCURRENCY} concurrent requests (overall and per host), no delay, "
        "robots.txt obeyed, a bound of 1.2x the truth's URLs + 100 requests, "
        f"{args.timeout_s:.0f} s time limit; one at a time, alternately, {args.runs} run(s) "
        "each. crawlfleet with bench/bench_parsers.py (links only, no item on these pages); "
        "Scrapy bench/scrapy_spider.py; spider-rs bench/spider_rs_crawl.js (its default "
        "concurrency: the node binding has no setter); Crawlee bench/crawlee_http.py "
        '(ParselCrawler, HTTP). "exact" = every required URL once, optional ones at most '
        'once, nothing else, nothing robots.txt disallows; "others\' CPU" = CPU seconds the '
        "rest of the machine (nginx included) used during the run, and the 1-minute load "
        "average at its start (a shared 2-core machine: CPU figures are noisy)."
        + (
            " crawlfleet-distN: N `crawlfleet worker --concurrency 64` processes and the "
            "dispatcher (`crawl --redis --postgres`, the same flags), scrapy-redis2: two "
            "bench/scrapy_redis_spider.py processes, all on a private redis-server (AOF, "
            "appendfsync everysec) and PostgreSQL; their CPU a page counts the whole system "
            "(crawler processes, redis-server, PostgreSQL), their peak RSS is the largest "
            "process's; scrapy-redis' wall time ends at its last response.\n\n"
            if distributed
            else "\n\n"
        )
        + f"{text}\n\nRerun:\n\n{rerun.rstrip()}\n"
    )
    for name, summary in profiles.items():
        body += f"\nProfile of crawlfleet on {name} (py-spy --threads, 200 Hz):\n\n```\n{summary}\n```\n"
    write_section(args.results, section, body)
    print(f"\nwrote {args.results}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpora", nargs="+", choices=list(CORPORA), default=list(CORPORA))
    parser.add_argument("--tools", nargs="+", choices=[*TOOLS, *DISTRIBUTED], default=list(TOOLS))
    parser.add_argument("--idle-s", type=int, default=3, help="scrapy-redis idle close")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument(
        "--gzip", action="store_true", help="nginx sends HTML gzip-compressed (level 1)"
    )
    parser.add_argument("--port", type=int, default=18421)
    parser.add_argument("--timeout-s", type=float, default=900.0, help="per crawl run")
    default_python = REPO / ".venv" / "bin" / "python"
    if not default_python.exists():
        default_python = Path("/work/main/.venv/bin/python")
    parser.add_argument(
        "--crawlfleet-python",
        type=Path,
        default=default_python,
        help="the Python with crawlfleet's dependencies (this tree's src/ goes first on the path)",
    )
    parser.add_argument(
        "--profile", action="store_true", help="and one crawlfleet crawl under py-spy"
    )
    parser.add_argument(
        "--profile-workers",
        action="store_true",
        help="py-spy (raw samples in the run's directory) the first worker and the "
        "dispatcher of every crawlfleet-distN run",
    )
    parser.add_argument(
        "--py-spy", type=Path, help="py-spy for --profile-workers (default: beside the Python)"
    )
    parser.add_argument("--top", type=int, default=30, help="functions shown by --profile")
    parser.add_argument("--results", type=Path, default=BENCH / "RESULTS.md")
    parser.add_argument("--no-results", action="store_true", help="print only")
    return parser.parse_args()


if __name__ == "__main__":
    main()
