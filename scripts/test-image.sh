#!/usr/bin/env bash
# Builds the container image (Containerfile) with buildah from a static
# zkgate binary, and checks it: zkgate version runs in it, as user 65532,
# with nothing in the image but the binary, CA certificates, passwd and
# group; the default command, without ZKGATE_ZK, says what it needs.
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
echo "test-image.sh: ok"
