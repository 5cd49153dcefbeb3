package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
	"github.com/zkgate/zkgate/server"
)

// TestDebugListenAndH2C: --debug-listen serves the profiles on an address
// of its own (the API's address does not); the plain port also speaks
// HTTP/2 with prior knowledge (h2c); a non-loopback debug address is
// refused at start unless --insecure.
func TestDebugListenAndH2C(t *testing.T) {
	t.Parallel()
	debugAddr := gwtest.FreeAddr(t)
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{Extra: []string{"--debug-listen", debugAddr}})

	var body string
	gwtest.Eventually(t, 10*time.Second, func() error {
		resp, err := http.Get("http://" + debugAddr + "/debug/pprof/goroutine?debug=1")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return nil
	})
	if !strings.Contains(body, "goroutine") {
		t.Fatalf("the goroutine profile: %.200s", body)
	}
	if r := gwtest.Do(t, "GET", g.URL+"/debug/pprof/", nil); r.Status != http.StatusNotFound {
		t.Fatalf("the API's address serves the profiles: %d", r.Status)
	}

	h2c := &http.Client{Transport: &http.Transport{Protocols: h2cOnly()}}
	resp, err := h2c.Get(g.URL + "/healthz")
	if err != nil {
		t.Fatalf("h2c: %v", err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("h2c answered with %s", resp.Proto)
	}

	for _, args := range [][]string{
		{"--debug-listen", "0.0.0.0:6060"},
		{"--debug-listen", "6060"},
	} {
		if _, err := server.ParseConfig(args, func(string) string { return "" }, io.Discard); err == nil {
			t.Errorf("%v was accepted", args)
		}
	}
	if _, err := server.ParseConfig([]string{"--debug-listen", "0.0.0.0:6060", "--insecure", "--zk", "127.0.0.1:1"},
		func(string) string { return "" }, io.Discard); err != nil {
		t.Errorf("--debug-listen with --insecure: %v", err)
	}
}

func h2cOnly() *http.Protocols {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &p
}
