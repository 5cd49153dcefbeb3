// Package packaging_test checks the files that the packages install
// against the program: the systemd unit's stop, restart and reload rules,
// and the settings file's list of variables.
package packaging_test

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/server"
)

// unitSettings reads a systemd unit's Key=Value lines; a repeated key keeps
// every value.
func unitSettings(t *testing.T, file string) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == '[' {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			out[k] = append(out[k], v)
		}
	}
	return out
}

// TestUnitStopsAfterTheDrain: the unit sends SIGTERM to zkgate alone (the
// embedded ZooKeeper must serve the drain) and waits longer than the
// default drain before SIGKILL; it restarts on failure, reloads tokens with
// SIGHUP, runs as its own user with its data in its state directory.
func TestUnitStopsAfterTheDrain(t *testing.T) {
	u := unitSettings(t, "systemd/zkgate.service")
	want := map[string]string{
		"KillMode": "mixed", "KillSignal": "SIGTERM", "Restart": "on-failure", "ExecReload": "/bin/kill -HUP $MAINPID",
		"User": "zkgate", "StateDirectory": "zkgate", "ProtectSystem": "strict", "NoNewPrivileges": "yes",
		"ExecStart": "/usr/bin/zkgate serve", "EnvironmentFile": "-/etc/zkgate/zkgate.env", "Environment": "ZKGATE_DATA_DIR=/var/lib/zkgate",
	}
	for k, v := range want {
		if got := u[k]; len(got) != 1 || got[0] != v {
			t.Errorf("%s=%v, want %s", k, got, v)
		}
	}
	cfg, err := server.ParseConfig([]string{"--zk", "127.0.0.1:2181"}, func(string) string { return "" }, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	stop, err := time.ParseDuration(strings.Join(u["TimeoutStopSec"], ""))
	if err != nil {
		t.Fatalf("TimeoutStopSec=%v: %v", u["TimeoutStopSec"], err)
	}
	// The drain, then the session's close and the embedded ZooKeeper's stop.
	if stop < cfg.DrainTimeout+15*time.Second {
		t.Errorf("TimeoutStopSec %s leaves too little after the default drain of %s", stop, cfg.DrainTimeout)
	}
}

// TestSettingsFileNamesEveryVariable: /etc/zkgate/zkgate.env lists every
// ZKGATE_* twin of zkgate serve's flags.
func TestSettingsFileNamesEveryVariable(t *testing.T) {
	var usage bytes.Buffer
	server.ParseConfig([]string{"-h"}, func(string) string { return "" }, &usage)
	vars := regexp.MustCompile(`\((ZKGATE_[A-Z0-9_]+)\)`).FindAllStringSubmatch(usage.String(), -1)
	if len(vars) < 20 {
		t.Fatalf("zkgate serve -h named %d variables:\n%s", len(vars), usage.String())
	}
	env, err := os.ReadFile("zkgate.env")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vars {
		if !regexp.MustCompile(`(?m)^#?` + v[1] + `=`).Match(env) {
			t.Errorf("zkgate.env does not list %s", v[1])
		}
	}
}
