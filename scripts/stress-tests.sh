#!/usr/bin/env bash
# The tests that depend on timing or load, run again and again under a CPU
# hog: those that start servers and ensembles, drop connections, wait for
# session expiries, pause or kill processes, or stream to slow readers. A
# test that fails once here is a bug to find, not a timeout to raise.
#
#   scripts/stress-tests.sh                 # every group, -count 20, one busy loop
#   COUNT=5 HOGS=2 scripts/stress-tests.sh server-faults dashboard
#   RACE=1 scripts/stress-tests.sh recipes  # under the race detector too
#
# A group is the tests of some files of one package (every func Test* in
# them, found again at each run, so renamed and new tests come along); the
# arguments pick groups by name. Each group runs with go test -count COUNT
# while HOGS busy loops (default 1: on 2 cores, half the machine) take the
# CPU at the same priority. It ends with one line a group and exits non-zero if any failed;
# the failures' output is kept in $OUT (default: a temp dir, printed).
set -euo pipefail
cd "$(dirname "$0")/.."

COUNT=${COUNT:-20}
HOGS=${HOGS:-1}
RACE=${RACE:-}
OUT=${OUT:-$(mktemp -d -t zkgate-stress.XXXXXX)}
mkdir -p "$OUT"

# name package files...
groups=(
  "dashboard ./dashboard ws_test.go"
  "server-faults ./server failover_test.go rollingrestart_test.go pause_test.go lostreply_test.go leasepromise_test.go drain_test.go supervise_test.go everygateway_test.go"
  "server-trust ./server embeddedtrust_test.go zkexposure_test.go zktls_test.go wsrevoke_test.go"
  "recipes-faults ./recipes connloss_test.go session_test.go readyourwrites_test.go leases_test.go handover_test.go line_test.go holds_test.go watches_test.go requests_test.go"
  "client ./client lease_test.go deadline_test.go consume_test.go"
  "cli ./cmd/zkgate supervise_test.go deadline_test.go follow_test.go"
  "zkserver ./zkserver zkserver_test.go"
  "harness ./internal/harness/gwtest pause_test.go"
  "proc ./internal/proc stopped_test.go"
  "zkproxy ./internal/harness/zkproxy zkproxy_test.go"
  "zkpatch ./internal/zkpatch zkpatch_test.go cost_test.go"
  "faults ./internal/harness/faults"
)

want=("$@")
picked() {
  [ ${#want[@]} -eq 0 ] && return 0
  local w
  for w in "${want[@]}"; do [ "$w" = "$1" ] && return 0; done
  return 1
}

# tests FILE...: the names of the tests in the files, as a -run pattern.
tests() {
  local names
  names=$(sed -n 's/^func \(Test[A-Za-z0-9_]*\)(t \*testing\.T).*/\1/p' "$@" | paste -sd '|')
  [ -n "$names" ] || { echo "stress-tests.sh: no test in $*" >&2; exit 2; }
  echo "^($names)\$"
}

hogs=()
stop_hogs() { [ ${#hogs[@]} -eq 0 ] || kill "${hogs[@]}" 2>/dev/null || true; }
trap stop_hogs EXIT
for _ in $(seq 1 "$HOGS"); do
  (while :; do :; done) &
  hogs+=($!)
done

flags=(-v -count "$COUNT" -timeout 60m)
[ -n "$RACE" ] && flags+=(-race)
echo "stress-tests: -count $COUNT under $HOGS busy loops on $(nproc) cores${RACE:+, with -race}; output of failures in $OUT"
results=()
failed=0
for g in "${groups[@]}"; do
  read -r name pkg files <<<"$g"
  picked "$name" || continue
  run=()
  if [ -n "$files" ]; then
    # shellcheck disable=SC2086 # files is a list
    run=(-run "$(cd "$pkg" && tests $files)")
  fi
  start=$(date +%s)
  log="$OUT/$name.log"
  if go test "${flags[@]}" "${run[@]}" "$pkg" >"$log" 2>&1; then
    status=ok
  else
    status=FAIL
    failed=1
  fi
  runs=$(grep -c -- '^--- PASS' "$log" || true)
  fails=$(grep -c -- '^--- FAIL' "$log" || true)
  took=$(($(date +%s) - start))
  line=$(printf '%-16s %-4s %4d s  %s passed, %s failed' "$name" "$status" "$took" "$runs" "$fails")
  echo "$line"
  results+=("$line")
  if [ "$status" = FAIL ]; then
    grep -E -- '^(--- FAIL|FAIL|panic:)|_test\.go:[0-9]+:' "$log" | head -40 || true
  fi
done
echo "stress-tests: summary (-count $COUNT, $HOGS busy loops)"
printf '%s\n' "${results[@]}"
exit $failed
