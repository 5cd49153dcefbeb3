#!/bin/sh
# A lease, a lock and a write checked by its fencing token, first with curl,
# then with `zkgate lock`; then a queue consumed at least once, with curl
# and with `zkgate queue`. Needs curl and a gateway:
#
#   ZKGATE_URL=http://127.0.0.1:8080 ZKGATE=/path/to/zkgate sh examples/lock.sh
#
# The "storage" is a directory: a ledger file, and the largest fencing token
# it has accepted. It refuses a write whose token is smaller than that one,
# or that the gateway says is not held now.
set -eu
URL=${ZKGATE_URL:-http://127.0.0.1:8080}
ZKGATE=${ZKGATE:-zkgate}
LOCK=${LOCK:-example-ledger}
QUEUE=${QUEUE:-example-jobs}
export ZKGATE_URL="$URL" LOCK

# field JSON KEY prints a top-level string or number of a JSON object
# (enough for these answers; use jq for anything more).
field() {
	printf '%s' "$1" | sed -n 's/.*"'"$2"'":"\{0,1\}\([^",}]*\).*/\1/p'
}

# write_fenced TOKEN LINE: what the storage does with a write.
write_fenced() {
	last=$(cat "$STORE/token" 2>/dev/null || echo 0)
	if [ "$1" -lt "$last" ]; then
		echo "storage: refused token $1, it has seen $last"
		return 1
	fi
	status=$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/locks/$LOCK/fence?token=$1")
	if [ "$status" != 200 ]; then
		echo "storage: refused token $1, stale ($status)"
		return 1
	fi
	echo "$1" >"$STORE/token"
	echo "$2" >>"$STORE/ledger"
}

# `zkgate lock` runs this script again as its command, to write under the lock.
if [ "${1:-}" = write ]; then
	write_fenced "$ZKGATE_FENCING_TOKEN" "$2 (token $ZKGATE_FENCING_TOKEN)"
	exit
fi

STORE=$(mktemp -d)
export STORE
trap 'rm -rf "$STORE"' EXIT

echo "== a lock with curl"
lease=$(curl -sf -X POST "$URL/v1/leases" -d '{"ttl":"15s","holder":"examples/lock.sh"}')
LEASE=$(field "$lease" id)
# Work longer than the TTL would POST $URL/v1/leases/$LEASE/keepalive every few seconds.
grant=$(curl -sf -X POST "$URL/v1/locks/$LOCK/acquire?wait=10s" -d "{\"lease\":\"$LEASE\"}")
TOKEN=$(field "$grant" token)
echo "holding $LOCK with token $TOKEN"
write_fenced "$TOKEN" "written with curl (token $TOKEN)"
curl -sf -X POST "$URL/v1/locks/$LOCK/release" -d "{\"lease\":\"$LEASE\"}"
curl -sf -X DELETE "$URL/v1/leases/$LEASE"
# A write that comes late, after the release, is refused.
if write_fenced "$TOKEN" "a late write"; then
	echo "a stale token was accepted" >&2
	exit 1
fi

echo "== the same with zkgate lock"
# zkgate takes the lease, keeps it alive, acquires, runs the command with
# ZKGATE_FENCING_TOKEN in its environment, then releases and revokes.
"$ZKGATE" lock --wait 10s --ttl 15s "$LOCK" -- sh "$0" write "written under zkgate lock"

echo "== the ledger"
cat "$STORE/ledger"

echo "== a queue"
for job in a b c; do
	curl -sf -X POST "$URL/v1/queues/$QUEUE/items" --data-binary "job $job" >/dev/null
done
# curl: claim (at least once) with a lease made for the claim, ack when done.
curl -sf -D "$STORE/headers" -o "$STORE/item" -X POST "$URL/v1/queues/$QUEUE/claim?wait=5s" \
	-d '{"ttl":"30s","holder":"examples/lock.sh"}'
header() { tr -d '\r' <"$STORE/headers" | sed -n "s/^$1: *//p"; }
ID=$(header X-Zkgate-Item-Id)
LEASE=$(header X-Zkgate-Lease)
echo "curl handled: $(cat "$STORE/item")"
curl -sf -X POST "$URL/v1/queues/$QUEUE/items/$ID/ack" -d "{\"lease\":\"$LEASE\"}"
curl -sf -X DELETE "$URL/v1/leases/$LEASE"
# zkgate queue: the rest, until the queue stays empty (exit 75).
LEASE=$("$ZKGATE" lease grant --ttl 30s --holder examples/lock.sh)
while :; do
	code=0
	item=$("$ZKGATE" queue claim --json --lease "$LEASE" --wait 500ms "$QUEUE") || code=$?
	[ "$code" = 75 ] && break
	[ "$code" = 0 ] || exit "$code"
	echo "zkgate handled: $(field "$item" data)"
	"$ZKGATE" queue ack --lease "$LEASE" "$QUEUE" "$(field "$item" id)"
done
"$ZKGATE" lease revoke "$LEASE"
curl -sf -X DELETE "$URL/v1/queues/$QUEUE"
echo "== done"
