#!/usr/bin/env bash
# Runs a pinned Go tool, built once from the Go module proxy and kept in
# ${ZKGATE_TOOLS:-~/.cache/zkgate-tools}/NAME-VERSION, so later runs (and CI
# on the same machine) start it at once.
#   scripts/gotool.sh goreleaser|helm [ARGS...]
#   scripts/gotool.sh --warm-up     build them all in the background
set -euo pipefail
name=${1:?usage: scripts/gotool.sh goreleaser|helm [ARGS...] | --warm-up}
shift
if [ "$name" = --warm-up ]; then
  # Build every pinned tool in the background, at the lowest priority, and
  # return at once: a later call waits for the build under way (the lock).
  (nice -n 19 "$0" goreleaser --version && nice -n 19 "$0" helm version) >/dev/null 2>&1 &
  exit 0
fi
case "$name" in
goreleaser) pkg=github.com/goreleaser/goreleaser/v2 version=v2.15.1 ;;
helm) pkg=helm.sh/helm/v3/cmd/helm version=v3.22.0 ;;
*) echo "gotool.sh: no pinned tool named $name" >&2; exit 2 ;;
esac
dir=${ZKGATE_TOOLS:-$HOME/.cache/zkgate-tools}/$name-$version
if [ ! -x "$dir/$name" ]; then
  mkdir -p "$dir"
  # One build at a time (.ci/run starts them early, in the background): a
  # second caller waits for the first and finds the tool built.
  exec 9>"$dir.lock"
  flock 9
  if [ ! -x "$dir/$name" ]; then
    echo "gotool.sh: building $pkg@$version once into $dir ..." >&2
    # Outside the module, so that zkgate's go.mod does not take part.
    rm -rf "$dir.tmp"
    (cd "$dir" && GOBIN="$dir.tmp" go install "$pkg@$version") && mv "$dir.tmp/$name" "$dir/$name" && rmdir "$dir.tmp"
  fi
  exec 9>&-
fi
exec "$dir/$name" "$@"
