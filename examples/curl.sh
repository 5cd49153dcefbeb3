#!/usr/bin/env bash
# A worker in plain shell, with curl and jq: it takes a lease (and keeps it
# alive), takes a lock, writes to a store that checks the lock's fencing
# token, and consumes a queue at least once (claim, then ack).
#
#   ZKGATE_URL=http://127.0.0.1:8080 examples/curl.sh [LOCK [QUEUE]]
#
# It produces its own three items first, so that it runs on its own; it exits
# non-zero on any failure.
set -euo pipefail

GW=${ZKGATE_URL:-http://127.0.0.1:8080}
LOCK=${1:-invoices}
QUEUE=${2:-emails}
auth=()
[ -n "${ZKGATE_TOKEN:-}" ] && auth=(-H "Authorization: Bearer $ZKGATE_TOKEN")
for tool in curl jq; do
  command -v "$tool" >/dev/null || { echo "curl.sh needs $tool (apt-get install -y $tool)" >&2; exit 1; }
done

# api: one call; an error status prints the gateway's problem and fails the script.
api() { curl -sS --fail-with-body "${auth[@]}" "$@"; }

work=$(mktemp -d)
keepalive_pid=
cleanup() {
  local rc=$?
  set +e
  if [ -n "$keepalive_pid" ]; then kill "$keepalive_pid" 2>/dev/null; wait "$keepalive_pid" 2>/dev/null; fi
  # Revoking the lease releases everything it still holds (the lock, a claim).
  if [ -n "${LEASE:-}" ]; then curl -sS -o /dev/null "${auth[@]}" -X DELETE "$GW/v1/leases/$LEASE"; fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT

# The producer's side: three emails.
for i in 1 2 3; do
  api -X POST "$GW/v1/queues/$QUEUE/items" --data-binary "email $i" >/dev/null
done

# A lease of 15 s, kept alive every 5 s while the script runs.
LEASE=$(api -X POST "$GW/v1/leases" -d '{"ttl":"15s","holder":"curl-example"}' | jq -er .id)
( while sleep 5; do api -X POST "$GW/v1/leases/$LEASE/keepalive" >/dev/null || exit 1; done ) &
keepalive_pid=$!

# The lock, waiting up to 10 s; its token fences every write below.
TOKEN=$(api -X POST "$GW/v1/locks/$LOCK/acquire?wait=10s" -d "{\"lease\":\"$LEASE\"}" | jq -er .token)
echo "lock $LOCK held with fencing token $TOKEN"

# A store that takes a write only with the token of a current holder of the
# lock, and never with a token older than one it has seen.
store=$work/store
echo 0 >"$store.token"
write() { # token line
  local status
  status=$(curl -sS -o "$work/fence" -w '%{http_code}' "${auth[@]}" "$GW/v1/locks/$LOCK/fence?token=$1")
  if [ "$status" != 200 ]; then
    echo "store: refused a write with token $1 ($status: $(jq -r .detail "$work/fence" 2>/dev/null))" >&2
    return 1
  fi
  if [ "$1" -lt "$(cat "$store.token")" ]; then
    echo "store: refused a write with token $1, older than $(cat "$store.token")" >&2
    return 1
  fi
  echo "$1" >"$store.token"
  echo "$2" >>"$store"
}

# Consume the queue: claim an item, write it, ack it; a claim answering 204 means it is empty.
done_items=0
while :; do
  status=$(curl -sS "${auth[@]}" -X POST "$GW/v1/queues/$QUEUE/claim?wait=1s" -d "{\"lease\":\"$LEASE\"}" \
    -D "$work/headers" -o "$work/item" -w '%{http_code}')
  case $status in
  204) break ;;
  200) ;;
  *) echo "claim: $status $(cat "$work/item")" >&2; exit 1 ;;
  esac
  id=$(tr -d '\r' <"$work/headers" | awk 'tolower($1) == "x-zkgate-item-id:" {print $2}')
  write "$TOKEN" "$(cat "$work/item")"
  api -X POST "$GW/v1/queues/$QUEUE/items/$id/ack" -d "{\"lease\":\"$LEASE\"}"
  done_items=$((done_items + 1))
done

api -X POST "$GW/v1/locks/$LOCK/release" -d "{\"lease\":\"$LEASE\"}"
# Once released, the token is stale: the store refuses it.
if write "$TOKEN" "too late" 2>/dev/null; then
  echo "the store took a write with a released token" >&2
  exit 1
fi

echo "consumed $done_items items:"
cat "$store"
[ "$done_items" -ge 3 ] || { echo "expected at least 3 items, consumed $done_items" >&2; exit 1; }
