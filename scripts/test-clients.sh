#!/usr/bin/env bash
# The clients' part of `make test`:
#   1. the contract: Redocly's recommended lint of openapi.yaml (redocly.yaml),
#      then TypeScript types generated from it by openapi-typescript, checked
#      by tsc against the Node client, its tests and the Node example;
#   2. a real gateway (bin/zkgate on its embedded ZooKeeper, a free loopback
#      port, a temporary data dir), and against it the Python client's tests,
#      the Node client's tests (one of them runs tools' tsc on index.d.ts with
#      TypeScript's default libs only) and every example (the Python one with the
#      client pip-installed into a fresh venv, the Node one with the client
#      npm-installed), then the gateway is stopped and nothing may be left.
# The npm tools are pinned in tools/package-lock.json and examples/node's
# lock file, installed with `npm ci` when the lock file changed.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

fail() {
  echo "test-clients: $*" >&2
  exit 1
}
step() { printf '\n=== %s\n' "$*"; }

# --- what it needs, said loudly -----------------------------------------------
for tool in go node npm python3 curl jq; do
  command -v "$tool" >/dev/null 2>&1 || fail "$tool is missing: run scripts/deps.sh test (as root) or install it"
done
node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)' ||
  fail "Node $(node --version) is too old: the contract tools (@redocly/cli 2) need Node 20.19 or later"
python3 -c 'import sys; sys.exit(sys.version_info < (3, 9))' || fail "python3 is older than 3.9"
# The pip install of client/python is checked offline (no PyPI here) with a
# Python that has setuptools and wheel: Debian's, with python3-venv.
pybuild=${ZKGATE_TEST_PYTHON:-/usr/bin/python3}
"$pybuild" -c 'import setuptools, wheel, ensurepip' 2>/dev/null ||
  fail "$pybuild lacks setuptools, wheel or venv: apt-get install -y python3-setuptools python3-wheel python3-venv (or set ZKGATE_TEST_PYTHON)"

# npm ci, once per lock file.
npm_ci() { # dir
  local dir=$1
  if ! cmp -s "$dir/package-lock.json" "$dir/node_modules/.zkgate-installed-lock" 2>/dev/null; then
    echo "npm ci in $dir"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
    cp "$dir/package-lock.json" "$dir/node_modules/.zkgate-installed-lock"
  fi
}

timed() { # name command...
  local name=$1 start=$SECONDS
  shift
  step "$name"
  "$@"
  echo "--- $name: ok in $((SECONDS - start))s"
}

# --- 1. the contract ------------------------------------------------------------
contract() {
  npm_ci tools
  npm_ci examples/node
  tools/node_modules/.bin/redocly lint --config redocly.yaml --format=stylish openapi.yaml
  mkdir -p tools/gen
  # Quiet unless it fails: its warnings are the lint's, shown above.
  local out
  out=$(tools/node_modules/.bin/openapi-typescript openapi.yaml --default-non-nullable false -o tools/gen/openapi.d.ts --redocly redocly.yaml 2>&1) ||
    fail "openapi-typescript failed: $out"
  tools/node_modules/.bin/tsc -p tools
  echo "tsc: tools/contract.mts, client/node and examples/node agree with openapi.yaml"
}
timed "contract: redocly lint, openapi-typescript, tsc" contract

# --- 2. a real gateway ------------------------------------------------------------
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zkgate-clients.XXXXXX")
gw_pid=
stop_gateway() {
  local rc=$?
  set +e
  if [ -n "$gw_pid" ] && kill -0 "$gw_pid" 2>/dev/null; then
    kill -TERM "$gw_pid"
    for _ in $(seq 1 200); do kill -0 "$gw_pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$gw_pid" 2>/dev/null; then
      echo "test-clients: the gateway did not stop within 20s of SIGTERM" >&2
      kill -KILL "$gw_pid"
      rc=1
    fi
    wait "$gw_pid" 2>/dev/null
  fi
  # Nothing the gateway started (its embedded ZooKeeper runs from $tmp) may be left.
  local left
  left=$(pgrep -f "$tmp" || true)
  if [ -n "$left" ]; then
    echo "test-clients: processes left behind: $(ps -o pid=,args= -p "$(echo "$left" | paste -sd,)")" >&2
    kill -KILL $left 2>/dev/null
    rc=1
  fi
  if [ "$rc" -ne 0 ] && [ -s "$tmp/gateway.log" ]; then
    echo "--- the gateway's log (last 40 lines)" >&2
    tail -n 40 "$tmp/gateway.log" >&2
  fi
  rm -rf "$tmp"
  exit "$rc"
}
trap stop_gateway EXIT

start_gateway() {
  go build -o bin/zkgate ./cmd/zkgate
  bin/zkgate serve --listen 127.0.0.1:0 --data-dir "$tmp/data" >"$tmp/gateway.out" 2>"$tmp/gateway.log" &
  gw_pid=$!
  local url=
  for _ in $(seq 1 600); do
    url=$(sed -n 's/^zkgate listening on \(http:[^ ]*\).*/\1/p' "$tmp/gateway.out")
    [ -n "$url" ] && break
    kill -0 "$gw_pid" 2>/dev/null || fail "the gateway exited before serving"
    sleep 0.1
  done
  [ -n "$url" ] || fail "the gateway did not serve within 60s"
  for _ in $(seq 1 300); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/readyz")" = 200 ] && break
    sleep 0.1
  done
  [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/readyz")" = 200 ] || fail "the gateway was not ready within 30s"
  export ZKGATE_URL=$url
  echo "gateway $ZKGATE_URL (pid $gw_pid, data $tmp/data)"
}
timed "gateway: build and start bin/zkgate" start_gateway

timed "python client: python3 -m unittest" python3 -m unittest discover -s client/python/tests -v
timed "node client: node --test" node --test client/node/test/

run=$(date +%s)-$$
timed "example: examples/curl.sh" examples/curl.sh "curl-$run" "curl-$run"

python_example() {
  # The documented offline install: a venv that sees Debian's setuptools and
  # wheel, and pip without build isolation. A copy, so the build leaves
  # nothing in the work tree.
  "$pybuild" -m venv --system-site-packages "$tmp/venv"
  cp -r client/python "$tmp/zkgate-python"
  PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 "$tmp/venv/bin/pip" install -q --no-build-isolation "$tmp/zkgate-python"
  "$tmp/venv/bin/python" -c 'import os, zkgate; assert os.path.exists(os.path.join(os.path.dirname(zkgate.__file__), "py.typed"))'
  (cd "$tmp" && "$tmp/venv/bin/python" "$repo/examples/python/worker.py" "py-$run" "py-$run")
}
timed "example: examples/python/worker.py (pip-installed client)" python_example

timed "example: examples/node/worker.mjs (npm-installed client)" node examples/node/worker.mjs "node-$run" "node-$run"

step "clients: every test and example passed"
