#!/usr/bin/env bash
# Builds the container image (Containerfile) with buildah from a static
# zkgate binary, and checks it: zkgate version runs in it, as user 65532,
# with nothing in the image but the binary, CA certificates, passwd and
# group; the default command, without ZKGATE_ZK, says what it needs; with a
# ZooKeeper on loopback, it serves.
#   scripts/test-image.sh BINARY WANTED-VERSION-LINE
# Root only (buildah with the vfs driver and chroot isolation, which need
# no daemon and no registry).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:?usage: scripts/test-image.sh BINARY WANTED-VERSION-LINE}
want=${2:?usage: scripts/test-image.sh BINARY WANTED-VERSION-LINE}
fail() { echo "test-image.sh: FAIL: $*" >&2; exit 1; }
bh() { buildah --storage-driver vfs "$@"; }
ca=/etc/ssl/certs/ca-certificates.crt
[ -s "$ca" ] || fail "no $ca on this machine (Debian's ca-certificates)"
mkdir -p build/image
cp "$ca" build/image/ca-certificates.crt
tag=localhost/zkgate-test:$$
ctr=
cleanup() {
  [ -z "$ctr" ] || bh rm "$ctr" >/dev/null 2>&1 || true
  bh rmi -f "$tag" >/dev/null 2>&1 || true
}
trap cleanup EXIT
bh bud --isolation chroot --quiet --build-arg ZKGATE_BINARY="$bin" -f Containerfile -t "$tag" . >/dev/null
ctr=$(bh from --quiet "$tag")
run() { bh run --isolation chroot "$ctr" -- "$@"; }

# What the image holds, before a run adds /etc/hosts and the like.
mnt=$(bh mount "$ctr")
files=$(cd "$mnt" && find . -mindepth 1 \( -type f -o -type l \) | sort | tr '\n' ' ')
[ "$files" = "./etc/group ./etc/passwd ./etc/ssl/certs/ca-certificates.crt ./usr/bin/zkgate ./var/lib/zkgate/README " ] ||
  fail "the image holds more or less than it should: $files"
[ "$(stat -c %u "$mnt/var/lib/zkgate")" = 65532 ] || fail "/var/lib/zkgate is not zkgate's"
bh umount "$ctr" >/dev/null
got=$(run /usr/bin/zkgate version) || fail "zkgate version in the image"
[ "$got" = "$want" ] || fail "zkgate version in the image: $got, want $want"
user=$(bh inspect --format '{{.OCIv1.Config.User}}' "$ctr")
[ "$user" = 65532:65532 ] || fail "the image runs as $user, not 65532:65532"

# The default command without an ensemble or tokens: a clear refusal.
if out=$(bh run --isolation chroot "$ctr" -- /usr/bin/zkgate serve 2>&1); then
  fail "zkgate serve started with no ensemble and no tokens"
fi
echo "$out" | grep -q 'auth-file' || fail "zkgate serve without tokens said: $out"
if out=$(bh run --isolation chroot --env ZKGATE_INSECURE=true "$ctr" -- /usr/bin/zkgate serve 2>&1); then
  fail "zkgate serve started with no ensemble"
fi
echo "$out" | grep -q 'ZKGATE_ZK' || fail "zkgate serve without ZKGATE_ZK said: $out"

# The image's gateway in front of a real ZooKeeper: the embedded one of a
# gateway run here from the same binary, on loopback (chroot isolation
# shares this machine's network). That ZooKeeper admits TLS clients with its
# client certificate alone, which the host's gateway writes out
# (--embedded-zk-credentials) and the image's is given, as user 65532, with
# --zk-tls-*: the image reaches an ensemble that admits certificates only.
# It must get ready and grant a lease.
work=$(mktemp -d)
host= runner= inner=()
# Pure bash: a process may end while it is read, and no tool's output is cut short.
children() {
  local status k v
  for status in /proc/[0-9]*/status; do
    { while read -r k v; do
      if [ "$k" = PPid: ]; then
        if [ "$v" = "$1" ]; then status=${status#/proc/}; echo "${status%/status}"; fi
        break
      fi
    done; } 2>/dev/null <"$status" || true
  done
}
descendants() { local c; for c in $(children "$1"); do echo "$c"; descendants "$c"; done; }
# buildah run does not pass SIGTERM on: the image's gateway is found among
# its descendants, and stopped itself.
find_inner() {
  local pid
  for pid in $(descendants "$runner"); do
    if [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = zkgate ]; then inner+=("$pid"); fi
  done
}
# The image's gateway first (buildah run ends with it), then the host's.
stop_all() {
  local pid
  [ -z "$runner" ] || [ ${#inner[@]} -gt 0 ] || find_inner
  for pid in "${inner[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  if [ -n "$runner" ]; then
    for _ in $(seq 100); do kill -0 "$runner" 2>/dev/null || break; sleep 0.1; done
    kill -TERM "$runner" 2>/dev/null || true
    wait "$runner" 2>/dev/null || true
  fi
  if [ -n "$host" ]; then
    kill -TERM "$host" 2>/dev/null || true
    wait "$host" 2>/dev/null || true
  fi
  rm -rf "$work"
  cleanup
}
trap stop_all EXIT
# Made here: the background job opens them only once it runs.
: >"$work/host.err"
: >"$work/image.err"
"$bin" serve --listen 127.0.0.1:0 --data-dir "$work/data" --drain-timeout 0s --embedded-zk-credentials "$work/creds" \
  >"$work/host.out" 2>"$work/host.err" &
host=$!
zk=
for _ in $(seq 600); do
  zk=$(sed -n 's/.*embedded ZooKeeper started.* addr=\([0-9.:]*\).*/\1/p' "$work/host.err")
  [ -n "$zk" ] && [ -s "$work/creds/ca.pem" ] && break
  kill -0 "$host" 2>/dev/null || fail "the host's gateway exited: $(cat "$work/host.err")"
  sleep 0.1
done
[ -n "$zk" ] || fail "no embedded ZooKeeper within 60s: $(cat "$work/host.err")"
[ -s "$work/creds/ca.pem" ] || fail "no client credentials of the embedded ZooKeeper within 60s: $(cat "$work/host.err")"
mkdir "$work/zk-tls"
cp "$work/creds/ca.pem" "$work/creds/client.pem" "$work/zk-tls/"
chown -R 65532:65532 "$work/zk-tls"
chmod 0500 "$work/zk-tls"
chmod 0400 "$work/zk-tls"/*.pem
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
bh run --isolation chroot --volume "$work/zk-tls:/zk-tls:ro" --env ZKGATE_ZK_TLS_CA=/zk-tls/ca.pem \
  --env ZKGATE_ZK_TLS_CERT=/zk-tls/client.pem --env ZKGATE_ZK_TLS_KEY=/zk-tls/client.pem \
  --env ZKGATE_ZK="$zk" --env ZKGATE_INSECURE=true --env ZKGATE_LISTEN=127.0.0.1:"$port" \
  --env ZKGATE_DRAIN_TIMEOUT=0s "$ctr" -- /usr/bin/zkgate serve >"$work/image.out" 2>"$work/image.err" &
runner=$!
ready=
for _ in $(seq 300); do
  if curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; then ready=1; break; fi
  kill -0 "$runner" 2>/dev/null || fail "the image's gateway exited: $(cat "$work/image.err")"
  sleep 0.1
done
find_inner
[ -n "$ready" ] || fail "the image's gateway was not ready within 30s: $(cat "$work/image.err")"
[ ${#inner[@]} -gt 0 ] || fail "the image's gateway serves, but is no descendant of buildah run ($runner): it could not be stopped"
lease=$(curl -fsS -X POST "http://127.0.0.1:$port/v1/leases" -d '{"ttl":"10s","holder":"image-test"}') ||
  fail "no lease from the image's gateway"
echo "$lease" | grep -q '"id"' || fail "the image's gateway answered a lease with: $lease"
echo "test-image.sh: ok"
