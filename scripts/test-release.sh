#!/usr/bin/env bash
# The release test of make test: goreleaser's check of .goreleaser.yaml, a
# snapshot release of linux/amd64 (built once, cached by Go's build cache),
# its archive and checksums, the .deb installed with dpkg on this machine
# (zkgate version, the man pages, the user, systemd-analyze's verify and
# security check of the unit, the conffile), removed again; then the
# container image built from the same binary with buildah and run.
# Needs root (dpkg -i, buildah): CI runs as root.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "test-release.sh: must run as root: it installs and removes the zkgate .deb with dpkg and builds an image with buildah" >&2
  exit 1
fi
for tool in dpkg systemd-analyze buildah jq groff; do
  command -v "$tool" >/dev/null || { echo "test-release.sh: $tool is missing (scripts/deps.sh test installs it)" >&2; exit 1; }
done
fail() { echo "test-release.sh: FAIL: $*" >&2; exit 1; }
step() { echo "--- $*"; }
goreleaser() { scripts/gotool.sh goreleaser "$@"; }

step "goreleaser check"
goreleaser check

step "snapshot release (linux/amd64 only)"
# The logs of the steps, kept for a look after a failure (build/ is ignored).
mkdir -p build
log=build/test-release.log
ZKGATE_RELEASE_LINUX_AMD64_ONLY=1 goreleaser release --snapshot --clean >"$log" 2>&1 || { cat "$log" >&2; fail "goreleaser release --snapshot"; }
version=$(jq -r .version dist/metadata.json)
commit=$(jq -r .commit dist/metadata.json)
date=$(jq -r .date dist/metadata.json | sed -E 's/\.[0-9]+Z$/Z/')
short=$commit
if git remote | grep -q .; then
  # goreleaser reads the commit only in a clone with a remote.
  [ "$commit" = "$(git rev-parse HEAD)" ] || fail "the snapshot's commit $commit is not HEAD's"
  short=$(git show -s --format=%h "$commit")
fi
artifact() { jq -r --arg t "$1" --arg g "$2" '.[] | select(.type == $t and (.name | test($g))) | .path' dist/artifacts.json; }
bin=$(artifact Binary '^zkgate$')
deb=$(artifact 'Linux Package' '\.deb$')
rpm=$(artifact 'Linux Package' '\.rpm$')
archive=$(artifact Archive '\.tar\.gz$')
[ -n "$bin" ] && [ -n "$deb" ] && [ -n "$rpm" ] && [ -n "$archive" ] || fail "missing artifacts in dist/artifacts.json"
want="zkgate $version (commit $short, built $date)"

step "static binary, stamped"
go version -m "$bin" | grep -q 'CGO_ENABLED=0' || fail "$bin was not built with CGO_ENABLED=0"
[ "$("$bin" --version)" = "$want" ] || fail "$bin --version: $("$bin" --version), want $want"

step "archive and checksums"
# The pages the binary makes of its commands: zkgate.1, zkgate-serve.1...
pages=$(mktemp -d)
"$bin" __man "$pages"
want_pages=$(cd "$pages" && ls | sort | tr '\n' ' ')
rm -rf "$pages"
case "$want_pages" in *"zkgate.1 "*) ;; *) fail "zkgate __man made no zkgate.1: $want_pages" ;; esac
case "$want_pages" in *"zkgate-queue-claim.1 "*) ;; *) fail "zkgate __man made no zkgate-queue-claim.1: $want_pages" ;; esac
listing=$(tar tzf "$archive" | grep -v '^man/' | grep -v '^docs/' | sort | tr '\n' ' ')
[ "$listing" = "BENCHMARKS.md LICENSE LICENSE.go-zookeeper NOTICE README.md openapi.yaml zkgate zkgate.env zkgate.service " ] || fail "$archive holds: $listing"
# Every document README.md links to is in the archive beside it (its links
# to the clients' source are to the repository).
unpacked=$(mktemp -d)
tar xzf "$archive" -C "$unpacked"
for target in $(grep -o '](\([^)#:]*\)' "$unpacked/README.md" | sed 's/^](//' | grep -E '\.(md|yaml|png)$' | sort -u); do
  [ -e "$unpacked/$target" ] || fail "$archive's README.md links to $target, which the archive does not hold"
done
rm -rf "$unpacked"
listing=$(tar tzf "$archive" | sed -n 's|^man/||p' | grep . | sort | tr '\n' ' ')
[ "$listing" = "$want_pages" ] || fail "$archive's man/ holds $listing, want $want_pages"
(cd dist && sha256sum --check --quiet checksums.txt) || fail "checksums.txt"

step "dpkg -i $deb"
if dpkg-query -W -f='${Status}' zkgate 2>/dev/null | grep -q 'ok installed'; then
  old=$(dpkg-query -W -f='${Version}' zkgate)
  case "$old" in
  *snapshot*) echo "removing zkgate $old, left by an earlier test"; dpkg --purge zkgate >/dev/null ;;
  *) fail "zkgate $old is installed on this machine: the test would replace it; remove it first" ;;
  esac
fi
trap 'dpkg --purge zkgate >/dev/null 2>&1 || true' EXIT
dpkg -i "$deb" >/dev/null
[ "$(/usr/bin/zkgate version)" = "$want" ] || fail "installed zkgate version: $(/usr/bin/zkgate version), want $want"
getent passwd zkgate >/dev/null || fail "no user zkgate after the install"
for page in $want_pages; do
  man_page=/usr/share/man/man1/$page.gz
  [ -f "$man_page" ] || fail "no $man_page"
  warnings=$(zcat "$man_page" | groff -man -Tutf8 -ww -z 2>&1) && [ -z "$warnings" ] || fail "groff on $man_page: $warnings"
done
[ "$(stat -c %a /etc/zkgate/zkgate.env)" = 600 ] || fail "/etc/zkgate/zkgate.env is not 0600"
dpkg-query -W -f='${Conffiles}\n' zkgate | grep -q '^ /etc/zkgate/zkgate.env ' || fail "/etc/zkgate/zkgate.env is not a conffile"
[ "$(stat -c %a:%G /etc/zkgate)" = 2750:zkgate ] || fail "/etc/zkgate is $(stat -c %a:%G /etc/zkgate), not 2750:zkgate"
# The tokens file as docs/operations.md's Install says to make it: the service's user
# reads it, through a rewrite too.
/usr/bin/zkgate token new --auth-file /etc/zkgate/tokens --name first '*:*:read' >/dev/null 2>&1
chmod 0640 /etc/zkgate/tokens
/usr/bin/zkgate token new --auth-file /etc/zkgate/tokens --name second '*:*:read' >/dev/null 2>&1
runuser -u zkgate -- grep -q '^second ' /etc/zkgate/tokens || fail "user zkgate cannot read /etc/zkgate/tokens: $(ls -l /etc/zkgate/tokens)"
rm /etc/zkgate/tokens
unit=/usr/lib/systemd/system/zkgate.service
out=$(systemd-analyze verify "$unit" 2>&1) && [ -z "$out" ] || fail "systemd-analyze verify $unit: $out"
# The unit's hardening keeps its exposure at 2.0 or less (of 10).
systemd-analyze security --offline=yes --threshold=20 "$unit" >"$log" 2>&1 || { cat "$log" >&2; fail "systemd-analyze security: exposure above 2.0"; }

step "dpkg --remove"
dpkg --remove zkgate >/dev/null
[ ! -e /usr/bin/zkgate ] && [ ! -e "$unit" ] || fail "files left by dpkg --remove"
[ -e /etc/zkgate/zkgate.env ] || fail "dpkg --remove took the conffile (only --purge may)"
dpkg --purge zkgate >/dev/null
[ ! -e /etc/zkgate/zkgate.env ] || fail "conffile left by dpkg --purge"
trap - EXIT

step "make install DESTDIR=..."
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
make --no-print-directory install DESTDIR="$stage" PREFIX=/usr/local >/dev/null
for f in usr/local/bin/zkgate usr/local/share/man/man1/zkgate.1 usr/local/share/man/man1/zkgate-serve.1 usr/local/lib/systemd/system/zkgate.service \
  usr/local/lib/sysusers.d/zkgate.conf etc/zkgate/zkgate.env; do
  [ -f "$stage/$f" ] || fail "make install did not install /$f"
done
"$stage/usr/local/bin/zkgate" version | grep -q "^zkgate .* (commit $(git rev-parse --short HEAD), built " || fail "make install's zkgate version: $("$stage/usr/local/bin/zkgate" version)"
grep -qx 'ExecStart=/usr/local/bin/zkgate serve' "$stage/usr/local/lib/systemd/system/zkgate.service" || fail "make install's unit does not start /usr/local/bin/zkgate"
rm -rf "$stage"
trap - EXIT

step "container image"
scripts/test-image.sh "$bin" "$want"
echo "test-release.sh: ok"
