package server_test

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/gwtest"
)

// junkWord is n random letters: a valid HTTP method, or a path segment.
func junkWord(rng *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('A' + rng.IntN(26))
	}
	return string(b)
}

// sendJunk sends n requests with made-up methods and paths (each distinct,
// each about size bytes of them), without a token, from 4 clients at once.
func sendJunk(t *testing.T, base string, n, size int, seed uint64) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			client := &http.Client{Transport: &http.Transport{}}
			defer client.CloseIdleConnections()
			for i := w; i < n; i += 4 {
				method, path := "GET", "/"+junkWord(rng, size)
				switch i % 3 {
				case 0:
					method, path = junkWord(rng, size), "/v1/locks/junk/acquire"
				case 1:
					method = junkWord(rng, size)
				}
				req, err := http.NewRequest(method, base+path, nil)
				if err != nil {
					errs <- err
					return
				}
				resp, err := client.Do(req)
				if err != nil {
					errs <- err
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode < 400 || resp.StatusCode >= 500 {
					errs <- fmt.Errorf("%s %.40s…: %d, want a 4xx", method, path, resp.StatusCode)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// liveHeap is the heap in use after a collection: what the process keeps.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestJunkMethodsAndPathsKeepNothing: requests with thousands of made-up
// methods and paths, without a token (tokens off, and on), leave /metrics
// as large as it was and the heap as it was (within a generous constant):
// the metrics' labels come from a fixed set. They grew by every distinct
// method, 458 MB of /metrics after 20,000 of them.
func TestJunkMethodsAndPathsKeepNothing(t *testing.T) {
	file, secrets := newTokensFile(t)
	for _, tc := range []struct {
		name   string
		extra  []string
		secret string
	}{
		{"tokens off", nil, ""},
		{"tokens on", []string{"--auth-file", file}, secrets["reader"]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gwtest.StartGateway(t, gwtest.GatewayOptions{Extra: tc.extra})
			metricsSize := func() int {
				t.Helper()
				r := doAs(t, g.URL, tc.secret, "GET", "/metrics", nil)
				mustStatus(t, r, 200, "metrics")
				return len(r.Body)
			}
			// Every kind of junk once, so that the values it folds into exist.
			sendJunk(t, g.URL, 60, 1000, 1)
			size0, heap0 := metricsSize(), liveHeap()
			sendJunk(t, g.URL, 3000, 1000, 2)
			size1, heap1 := metricsSize(), liveHeap()
			t.Logf("/metrics %d -> %d bytes; live heap %d -> %d KiB", size0, size1, heap0>>10, heap1>>10)
			// Counters gain digits (a few KiB in all); nothing else may
			// grow. Each made-up method added 15 KB.
			if size1 > size0+8<<10 {
				t.Errorf("/metrics grew from %d to %d bytes with 3,000 made-up methods and paths", size0, size1)
			}
			if heap1 > heap0+4<<20 {
				t.Errorf("the live heap grew from %d to %d KiB with 3,000 made-up methods and paths", heap0>>10, heap1>>10)
			}
		})
	}
}

// TestRefusedRequestsLogLittle: a burst of 100 requests with 1 MiB paths
// (and made-up methods) writes a bounded log: every line carries at most a
// few hundred bytes of the method and path, and refused requests past a
// few a second are counted, not logged one by one. The burst wrote the
// whole path in each line, 100 MiB of log.
func TestRefusedRequestsLogLittle(t *testing.T) {
	file, secrets := newTokensFile(t)
	g := startSecured(t, gwtest.GatewayOptions{}, file, secrets)
	before := len(g.Logs())
	huge := strings.Repeat("x", 1<<20-8<<10)
	for i := range 100 {
		method, path := "GET", "/v1/locks/"+huge
		switch i % 4 {
		case 1:
			path = "/nowhere/" + huge
		case 2:
			method = "PROPFIND" + huge[:1000]
		case 3:
			path = "/v1/locks/a%1B]0;owned%07" + huge
		}
		status := rawStatus(t, g.URL, method, path)
		if status < 400 || status >= 500 {
			t.Fatalf("%.20s %.40s…: %d, want a 4xx", method, path, status)
		}
	}
	// The gateway logs after it answers: wait for the count of the lines
	// it left out, written with the next line once the second is over.
	var logs string
	gwtest.Eventually(t, 10*time.Second, func() error {
		rawStatus(t, g.URL, "GET", "/nowhere")
		logs = g.Logs()[before:]
		if len(logs) > 256<<10 || strings.Contains(logs, "refused requests not logged") {
			return nil
		}
		return fmt.Errorf("no count of the refused requests left out of the log")
	})
	if len(logs) > 256<<10 {
		t.Fatalf("100 requests with 1 MiB paths wrote %d KiB of log", len(logs)>>10)
	}
	for _, line := range strings.Split(logs, "\n") {
		if len(line) > 2<<10 {
			t.Errorf("a log line of %d bytes: %.200s…", len(line), line)
		}
		if strings.ContainsRune(line, 0x1b) {
			t.Errorf("a log line carries a raw escape: %q", line)
		}
	}
	if !strings.Contains(logs, "path=/v1/locks/xxxx") && !strings.Contains(logs, `path="/v1/locks/xxxx`) {
		t.Errorf("the log does not show the start of the paths:\n%.2000s", logs)
	}
}

// rawStatus sends one request line as it is (no client would send a 1 MiB
// path) and returns the answer's status.
func rawStatus(t *testing.T, base, method, path string) int {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	w := bufio.NewWriter(conn)
	fmt.Fprintf(w, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", method, path, strings.TrimPrefix(base, "http://"))
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%.20s %.40s…: %v", method, path, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
