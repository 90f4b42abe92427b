#!/usr/bin/env bash
# Install what crawlfleet needs on a Debian machine: system packages (only those missing)
# and a virtualenv in .venv with the pinned Python dependencies.
#   scripts/bootstrap.sh          the embedded crawler only
#   scripts/bootstrap.sh --all    plus the distributed, dashboard and browser extras, Redis and
#                                 PostgreSQL servers, Chromium (the browser fetcher and browser
#                                 tests; never a downloaded browser), Prometheus and promtool
#                                 (metrics tests), docker-compose, iproute2 and systemd-analyze
#                                 (deploy/ checks, multi-host test), and test tools
set -euo pipefail
cd "$(dirname "$0")/.."

want_all=0
[ "${1:-}" = "--all" ] && want_all=1

need=()
# Python's headers and a C compiler build the nesting pre-check's scan and the memo of offered
# URLs (decisions 0063, 0067).
has_headers='import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'
if ! command -v python3 >/dev/null; then
    need+=(python3 python3-venv python3-dev)
elif ! python3 -c "$has_headers"; then
    need+=(python3-dev)
fi
command -v gcc >/dev/null || need+=(gcc libc6-dev)
if [ "$want_all" = 1 ]; then
    command -v redis-server >/dev/null || need+=(redis-server)
    command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
    [ -x /usr/bin/tinyproxy ] || need+=(tinyproxy)  # the proxy pool tests (tests/fixtures/tinyproxy.py)
    [ -x /usr/bin/chromium ] || need+=(chromium)  # the browser fetcher and its tests, the dashboard's (Playwright)
    command -v prometheus >/dev/null && command -v promtool >/dev/null || need+=(prometheus)  # tests/e2e/test_prometheus.py
    command -v docker-compose >/dev/null || need+=(docker-compose)  # deploy/compose.yaml is checked with `config`
    command -v ip >/dev/null || need+=(iproute2)                      # tests/e2e/test_multihost.py: network namespaces
    command -v systemd-analyze >/dev/null || need+=(systemd)          # deploy/systemd units: systemd-analyze verify
fi
if [ "${#need[@]}" -gt 0 ]; then
    echo "installing system packages: ${need[*]}"
    if [ "$(id -u)" = 0 ]; then apt_get=(apt-get); else apt_get=(sudo apt-get); fi
    "${apt_get[@]}" update -qq
    DEBIAN_FRONTEND=noninteractive "${apt_get[@]}" install -y -qq "${need[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
extras="."
[ "$want_all" = 1 ] && extras=".[all,test]"
.venv/bin/python -m pip install -q -e "$extras" 2>&1 | grep -v '^WARNING: Location' || true
# The bytecode pip writes for an installed package: an editable install has none, and where
# PYTHONDONTWRITEBYTECODE is set every crawlfleet process compiled its ~190 modules again
# (0.15 CPU s of a 0.9 s start-up; decision 0028).
.venv/bin/python -m compileall -q src/crawlfleet >/dev/null
.venv/bin/python -c "import crawlfleet" 
