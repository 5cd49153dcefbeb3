package main

import (
	"strings"
	"testing"
)

// TestCounterCommands: get, set, add (a negative delta too), a
// compare-and-set that fails with the counter's version and one that
// applies, the formats, and delete, as a shell user runs them.
func TestCounterCommands(t *testing.T) {
	t.Parallel()
	g := cliGateway(t)
	want := func(out string, args ...string) {
		t.Helper()
		code, stdout, stderr := runZkgate(t, g.URL, nil, args...)
		if code != 0 || stdout != out+"\n" {
			t.Fatalf("zkgate %s: %d %q %q, want %q", strings.Join(args, " "), code, stdout, stderr, out)
		}
	}
	want("0", "counter", "get", "hits")
	want("5", "counter", "add", "hits", "5")
	want("3", "counter", "add", "hits", "-2")
	want("10", "counter", "set", "hits", "10")
	code, _, stderr := runZkgate(t, g.URL, nil, "counter", "set", "--version", "0", "hits", "11")
	if code != exitFailed || !strings.Contains(stderr, "at version 2 (value 10)") {
		t.Fatalf("a stale compare-and-set: %d %q", code, stderr)
	}
	want("11", "counter", "set", "--version", "2", "hits", "11")
	want("2147483647", "counter", "set", "--format", "int32", "shared", "2147483647")
	if code, _, stderr := runZkgate(t, g.URL, nil, "counter", "add", "--format", "int32", "shared", "1"); code != exitFailed || !strings.Contains(stderr, "out_of_range") {
		t.Fatalf("an add past int32: %d %q", code, stderr)
	}
	if code, _, stderr := runZkgate(t, g.URL, nil, "counter", "get", "shared"); code != exitFailed || !strings.Contains(stderr, "format_mismatch") {
		t.Fatalf("an int32 read as decimal: %d %q", code, stderr)
	}
	if code, _, _ := runZkgate(t, g.URL, nil, "counter", "add", "hits", "one"); code != exitUsage {
		t.Fatalf("a delta that is no number: %d", code)
	}
	if code, stdout, _ := runZkgate(t, g.URL, nil, "counter", "delete", "hits"); code != 0 || stdout != "" {
		t.Fatalf("delete: %d %q", code, stdout)
	}
}
