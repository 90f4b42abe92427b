#!/usr/bin/env bash
# Install crawlfleet the way users do and crawl the bundled demo site with each install.
#
#   1. a worker host: a fresh venv with only `.[distributed]` (no test tools); a private
#      redis-server and PostgreSQL on free loopback ports; one `crawlfleet worker` and
#      `crawlfleet crawl --redis ... --postgres ...` from that venv; items must land in PostgreSQL
#   2. the embedded install: a fresh venv with only `.`; `crawlfleet crawl` into a state dir;
#      `crawlfleet worker` and `crawl --redis` there fail in one line naming the extra, and
#      so does a crawl whose parser names the browser fetcher (the browser extra)
#   3. a browser host: a fresh venv with only `.[browser]`; the jsapp example (pages a script
#      writes) crawled through Debian's Chromium must store every one of its 60 `js_item`s
#
# The venvs live in a temp dir outside the source tree, built from one wheel of a copy of the
# tree (pip may use the machine's wheel cache and index). Both crawls must store the same items.
# Every process started here is killed on exit. Usage: scripts/check_clean_install.sh
# (PYTHON picks the interpreter; KEEP=1 keeps the temp dir for a post-mortem).
set -euo pipefail
unset PYTHONPATH VIRTUAL_ENV  # nothing of the source tree or a dev venv may leak in

src=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/crawlfleet-install.XXXXXX")
chmod 755 "$work"  # the postgres user must reach its data dir below
started=$SECONDS
pids=()
pg_ctl_cmd=()

cleanup() {
    local rc=$? pid
    set +e  # kill everything even if one step fails
    for pid in "${pids[@]}"; do
        kill -9 "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    if [ "${#pg_ctl_cmd[@]}" -gt 0 ]; then
        "${pg_ctl_cmd[@]}" -D "$work/pg/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    if [ "${KEEP:-0}" = 1 ]; then echo "kept $work"; else rm -rf "$work"; fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 143' INT TERM

step() { echo "[$((SECONDS - started)) s] $*"; }

fail() {
    echo "FAILED: $*" >&2
    local log
    for log in "$work"/*.log; do
        [ -f "$log" ] && { echo "--- $log" >&2; tail -n 30 "$log" >&2; }
    done
    exit 1
}

free_port() {
    # A port free on 127.0.0.1..127.0.0.7 (the demo site binds one port on several addresses).
    "$python" - <<'EOF'
import socket
while True:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    try:
        for last in range(2, 8):
            with socket.socket() as sock:
                sock.bind((f"127.0.0.{last}", port))
    except OSError:
        continue
    print(port)
    break
EOF
}

wait_port() {  # wait_port HOST PORT WHAT
    local deadline=$((SECONDS + 30))
    until "$python" -c "import socket,sys; socket.create_connection(('$1', $2), 0.2).close()" 2>/dev/null; do
        [ "$SECONDS" -lt "$deadline" ] || fail "$3 not listening on $1:$2"
        sleep 0.05
    done
}

# --- the two installs, from one wheel of a copy of the tree (pip builds in the tree otherwise)
step "building the wheel in $work"
mkdir -p "$work/tree"
tar -C "$src" --exclude=./.venv --exclude=./.git --exclude=./build --exclude='*.egg-info' \
    --exclude=./bench/_work --exclude='__pycache__' --exclude='*.so' -cf - . | tar -C "$work/tree" -xf -
"$python" -m pip wheel -q --no-deps -w "$work/dist" "$work/tree" >"$work/wheel.log" 2>&1 ||
    fail "pip wheel"
wheel=$(ls "$work"/dist/crawlfleet-*.whl)

step "installing '[distributed]', '[browser]' and the bare package in three fresh venvs"
# venvs without pip of their own (ensurepip is the slowest step); the outer pip installs into them
"$python" -m venv --without-pip "$work/venv-dist"
"$python" -m venv --without-pip "$work/venv-embedded"
"$python" -m venv --without-pip "$work/venv-browser"
"$python" -m pip --python "$work/venv-dist/bin/python" install -q --no-compile \
    "crawlfleet[distributed] @ file://$wheel" >"$work/install-dist.log" 2>&1 &
dist_install=$!
pids+=("$dist_install")
"$python" -m pip --python "$work/venv-browser/bin/python" install -q --no-compile \
    "crawlfleet[browser] @ file://$wheel" >"$work/install-browser.log" 2>&1 &
browser_install=$!
pids+=("$browser_install")
"$python" -m pip --python "$work/venv-embedded/bin/python" install -q --no-compile "$wheel" \
    >"$work/install-embedded.log" 2>&1 || fail "pip install of the bare package"
wait "$dist_install" || fail "pip install of crawlfleet[distributed]"
wait "$browser_install" || fail "pip install of crawlfleet[browser]"
for venv in venv-dist venv-embedded venv-browser; do
    if "$work/$venv/bin/python" -c "import pytest" 2>/dev/null; then
        fail "$venv has pytest: not a clean install"
    fi
done

# --- the demo site, served by the embedded install
site_port=$(free_port)
"$work/venv-embedded/bin/crawlfleet" demo-site --port "$site_port" </dev/null >"$work/site.log" 2>&1 &
pids+=($!)
wait_port 127.0.0.3 "$site_port" "demo site"
seed="http://127.0.0.3:$site_port/"
fast=(--allow-private-addresses --delay 0)

step "embedded crawl of $seed"
"$work/venv-embedded/bin/crawlfleet" crawl "$seed" --state "$work/state" "${fast[@]}" \
    </dev/null >"$work/embedded.log" 2>&1 || fail "embedded crawl exited $?"
embedded_items=$("$work/venv-embedded/bin/python" -c "
import sqlite3, sys
print(sqlite3.connect(sys.argv[1]).execute('SELECT count(*) FROM items').fetchone()[0])
" "$work/state/items.sqlite")
[ "$embedded_items" -gt 0 ] || fail "the embedded crawl stored no item"

step "distributed commands on the bare install: one-line errors"
for command in "worker" "crawl $seed"; do
    rc=0
    # shellcheck disable=SC2086  # $command is two words on purpose
    COLUMNS=500 "$work/venv-embedded/bin/crawlfleet" $command --redis redis://127.0.0.1:1/0 \
        --postgres postgresql://127.0.0.1:1/x </dev/null >"$work/no-extra.log" 2>&1 || rc=$?
    [ "$rc" = 2 ] && [ "$(grep -c . "$work/no-extra.log")" = 1 ] &&
        grep -q "needs crawlfleet installed with its distributed extra" "$work/no-extra.log" ||
        fail "crawlfleet $command without the distributed extra: exit $rc, not one line"
done

step "a browser crawl on the bare install: one line naming the browser extra"
cat >"$work/js_parsers.py" <<'PY'
from crawlfleet.parsing import parser


@parser("127.0.0.14", fetcher="browser")
def js(response):
    return None
PY
rc=0
COLUMNS=500 "$work/venv-embedded/bin/crawlfleet" crawl "http://127.0.0.14:$site_port/" \
    --parsers "$work/js_parsers.py" --state "$work/js-state" "${fast[@]}" \
    </dev/null >"$work/no-browser.log" 2>&1 || rc=$?
[ "$rc" = 2 ] && [ "$(grep -c . "$work/no-browser.log")" = 1 ] &&
    grep -q "pip install 'crawlfleet\[browser\]'" "$work/no-browser.log" ||
    fail "a browser crawl without the browser extra: exit $rc, not one line"

step "browser crawl of the jsapp example from the '[browser]' install"
[ -x /usr/bin/chromium ] || fail "/usr/bin/chromium not found (scripts/bootstrap.sh --all installs it)"
"$work/venv-browser/bin/crawlfleet" crawl "http://127.0.0.14:$site_port/" \
    --parsers "$src/examples/jsapp/parsers.py" --state "$work/browser-state" "${fast[@]}" \
    </dev/null >"$work/browser.log" 2>&1 || fail "browser crawl exited $?"
js_items=$("$work/venv-browser/bin/python" -c "
import sqlite3, sys
query = \"SELECT count(*) FROM items WHERE item_type = 'js_item'\"
print(sqlite3.connect(sys.argv[1]).execute(query).fetchone()[0])
" "$work/browser-state/items.sqlite")
[ "$js_items" = 60 ] || fail "the browser crawl stored $js_items js_item items, not 60"

# --- a private Redis and PostgreSQL
redis_bin=$(command -v redis-server || echo /usr/bin/redis-server)
[ -x "$redis_bin" ] || fail "redis-server not found (scripts/bootstrap.sh --all installs it)"
redis_port=$(free_port)
mkdir -p "$work/redis"
"$redis_bin" --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly yes \
    --dir "$work/redis" --daemonize no >"$work/redis.log" 2>&1 </dev/null &
pids+=($!)

initdb_bin=$(command -v initdb || ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1 || true)
[ -n "$initdb_bin" ] || fail "initdb not found (scripts/bootstrap.sh --all installs PostgreSQL)"
pg_bin=$(dirname "$(readlink -f "$initdb_bin")")
as_pg=()
mkdir -p "$work/pg"
if [ "$(id -u)" = 0 ]; then
    chown postgres:postgres "$work/pg"
    as_pg=(runuser -u postgres --)
fi
pg_port=$(free_port)
step "starting redis-server :$redis_port and PostgreSQL :$pg_port"
"${as_pg[@]}" "$pg_bin/initdb" -D "$work/pg/data" -A trust -U postgres --no-sync \
    >"$work/initdb.log" 2>&1 || fail "initdb"
pg_ctl_cmd=("${as_pg[@]}" "$pg_bin/pg_ctl")
"${pg_ctl_cmd[@]}" -D "$work/pg/data" -l "$work/pg/server.log" -w start \
    -o "-p $pg_port -c listen_addresses=127.0.0.1 -k $work/pg -c fsync=off" \
    >"$work/pg_ctl.log" 2>&1 || fail "PostgreSQL did not start"
wait_port 127.0.0.1 "$redis_port" "redis-server"
redis_url="redis://127.0.0.1:$redis_port/0"
dsn="postgresql://postgres@127.0.0.1:$pg_port/postgres"

# --- one worker and the dispatcher, from the [distributed] venv
step "distributed crawl of $seed"
cf="$work/venv-dist/bin/crawlfleet"
"$cf" worker --redis "$redis_url" --postgres "$dsn" --concurrency 8 </dev/null \
    >"$work/worker.log" 2>&1 &
worker=$!
pids+=("$worker")
deadline=$((SECONDS + 30))
until grep -q "ready\." "$work/worker.log"; do
    kill -0 "$worker" 2>/dev/null || fail "the worker exited"
    [ "$SECONDS" -lt "$deadline" ] || fail "the worker is not ready after 30 s"
    sleep 0.1
done
timeout 120 "$cf" crawl "$seed" --redis "$redis_url" --postgres "$dsn" --crawl-id clean-install \
    "${fast[@]}" </dev/null >"$work/dispatcher.log" 2>&1 || fail "distributed crawl exited $?"
kill -TERM "$worker"
wait "$worker" || fail "the worker's warm shutdown exited $?"
distributed_items=$("$pg_bin/psql" "$dsn" -tAc "SELECT count(*) FROM items") ||
    fail "cannot count the items in PostgreSQL"
[ "$distributed_items" = "$embedded_items" ] ||
    fail "distributed crawl stored $distributed_items items, the embedded one $embedded_items"

step "ok: both installs crawled $seed and stored $embedded_items items; the browser install stored 60 js_items"
