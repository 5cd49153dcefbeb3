#!/usr/bin/env bash
# The install test of make test: the committed tree (HEAD, or the commit
# given as $1), served as a tagged version from a file-based module proxy
# (tools/modproxy), is what `go install github.com/zkgate/zkgate/cmd/zkgate@V`
# and another module importing recipes/ and client/ get. Both run outside
# the repository, as a user's would: a replace directive in go.mod, or a
# package that only builds inside this module, fails them.
#
# Dependencies come from the local module cache first, then GOPROXY; the
# test's own module cache is kept (ZKGATE_INSTALL_MODCACHE) between runs,
# less zkgate's own module, which is fetched afresh from the proxy each time.
# The version names the commit: the go command takes a module version's
# files as immutable (it keeps an index of their packages in its build
# cache), so two trees must never be served as one version.
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "test-install.sh: FAIL: $*" >&2; exit 1; }
step() { echo "--- $*"; }

ref=${1:-HEAD}
module=github.com/zkgate/zkgate
version=v0.0.1-installtest.g$(git rev-parse --short=12 "$ref^{commit}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Module caches are read-only; this empties zkgate's part of one.
forget_zkgate() {
  local d
  for d in "$1/github.com/zkgate" "$1/cache/download/github.com/zkgate"; do
    if [ -e "$d" ]; then chmod -R u+w "$d" && rm -rf "$d"; fi
  done
}

step "module proxy: $module@$version from $(git rev-parse --short "$ref")"
mkdir "$tmp/src"
git archive "$ref" | tar -x -C "$tmp/src"
go run ./tools/modproxy -dir "$tmp/src" -version "$version" -o "$tmp/proxy"

local_cache=$(go env GOMODCACHE)/cache/download
modcache=${ZKGATE_INSTALL_MODCACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/zkgate/test-install-mod}
mkdir -p "$modcache"
forget_zkgate "$modcache"
# As a user's go command sees it: no workspace, no flags of this
# environment, zkgate's module from the proxy (unknown to the checksum
# database, so checked against nothing but itself), the rest as usual.
export GOPROXY="file://$tmp/proxy,file://$local_cache,$(go env GOPROXY)"
export GOMODCACHE=$modcache GONOSUMDB=$module GOFLAGS= GOWORK=off GOPRIVATE= GONOPROXY= GOTOOLCHAIN=local

step "go install $module/cmd/zkgate@$version"
mkdir "$tmp/bin" "$tmp/elsewhere"
(cd "$tmp/elsewhere" && GOBIN=$tmp/bin go install "$module/cmd/zkgate@$version") ||
  fail "go install $module/cmd/zkgate@$version"
out=$("$tmp/bin/zkgate" version) || fail "the installed zkgate version: $out"
case $out in "zkgate "*) ;; *) fail "the installed zkgate version printed: $out" ;; esac
go version -m "$tmp/bin/zkgate" | grep -Eq "^[[:space:]]+mod[[:space:]]+$module[[:space:]]+$version([[:space:]]|$)" ||
  fail "the installed binary is not built from $module@$version: $(go version -m "$tmp/bin/zkgate" | head -3)"
echo "$out"

step "another module importing $module/recipes and $module/client"
mkdir "$tmp/outside"
cat >"$tmp/outside/go.mod" <<EOF
module example.com/outside

go 1.26

require $module $version
EOF
# zkgate's go.sum holds its dependencies' checksums, as a user's would.
cp "$tmp/src/go.sum" "$tmp/outside/go.sum"
cat >"$tmp/outside/main.go" <<'EOF'
package main

import (
	"fmt"

	"github.com/zkgate/zkgate/client"
	"github.com/zkgate/zkgate/recipes"
)

// session is never set: the program only has to compile, using what
// recipes exports, the ZooKeeper connection's type (internal to zkgate)
// included, without naming it.
var session *recipes.Session

func main() {
	c, err := client.New("http://127.0.0.1:8080")
	if err != nil {
		panic(err)
	}
	fmt.Println(c != nil, recipes.ModeExclusive)
	if session != nil {
		fmt.Println(session.Conn().State())
	}
}
EOF
(cd "$tmp/outside" && go mod tidy && go build -o "$tmp/bin/outside" .) ||
  fail "a module importing $module/recipes and $module/client does not build"
"$tmp/bin/outside" >/dev/null || fail "the outside module's program"
echo "ok: $module@$version installs and is importable"
