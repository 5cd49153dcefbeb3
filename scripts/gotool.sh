#!/usr/bin/env bash
# Runs a pinned Go tool, built once from the Go module proxy and kept in
# ${ZKGATE_TOOLS:-~/.cache/zkgate-tools}/NAME-VERSION, so later runs (and CI
# on the same machine) start it at once.
#   scripts/gotool.sh goreleaser|helm [ARGS...]
set -euo pipefail
name=${1:?usage: scripts/gotool.sh goreleaser|helm [ARGS...]}
shift
case "$name" in
goreleaser) pkg=github.com/goreleaser/goreleaser/v2 version=v2.15.1 ;;
helm) pkg=helm.sh/helm/v3/cmd/helm version=v3.22.0 ;;
*) echo "gotool.sh: no pinned tool named $name" >&2; exit 2 ;;
esac
dir=${ZKGATE_TOOLS:-$HOME/.cache/zkgate-tools}/$name-$version
if [ ! -x "$dir/$name" ]; then
  echo "gotool.sh: building $pkg@$version once into $dir ..." >&2
  mkdir -p "$dir"
  # Outside the module, so that zkgate's go.mod does not take part.
  (cd "$dir" && GOBIN="$dir.tmp" go install "$pkg@$version") && mv "$dir.tmp/$name" "$dir/$name" && rmdir "$dir.tmp"
fi
exec "$dir/$name" "$@"
