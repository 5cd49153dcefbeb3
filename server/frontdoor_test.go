package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
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
		wg.Go(func() {
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
		})
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
//
// Serial: it reads this process's heap, which the parallel tests' gateways
// share (it grew 8 MiB in a make test with them running beside it).
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
	t.Parallel()
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
	t.Logf("100 requests with 1 MiB paths: %d bytes of log", len(logs))
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

// trickleBody is the body of a trickled request: valid JSON, padded.
var trickleBody = `{"ttl":"30s"}` + strings.Repeat(" ", 287)

// trickleH1 sends a request over HTTP/1.1 whose body comes a byte every
// 100 ms (30 s in all), and returns the status of its answer once the
// gateway has closed the connection, or an error if the whole body went
// out first.
func trickleH1(ctx context.Context, base, secret, path string, local net.Addr) (int, error) {
	d := net.Dialer{LocalAddr: local}
	conn, err := d.DialContext(ctx, "tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", path, strings.TrimPrefix(base, "http://"), len(trickleBody))
	if secret != "" {
		head += "Authorization: Bearer " + secret + "\r\n"
	}
	if _, err := io.WriteString(conn, head+"\r\n"); err != nil {
		return 0, err
	}
	type answer struct {
		status int
		err    error
	}
	closed := make(chan answer, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			closed <- answer{0, err}
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		// Then nothing more: the gateway must close the connection (a
		// reset, when bytes it did not read were left).
		_, err = conn.Read(make([]byte, 1))
		if err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
			closed <- answer{resp.StatusCode, fmt.Errorf("after the answer %d: %v, want the connection closed", resp.StatusCode, err)}
			return
		}
		closed <- answer{resp.StatusCode, nil}
	}()
	pace := time.NewTicker(100 * time.Millisecond)
	defer pace.Stop()
	for i := 0; i < len(trickleBody); i++ {
		select {
		case a := <-closed:
			return a.status, a.err
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-pace.C:
		}
		if _, err := conn.Write([]byte{trickleBody[i]}); err != nil {
			break // the gateway closed: its answer, if any, is read
		}
	}
	select {
	case a := <-closed:
		if a.err == nil && a.status == 0 {
			a.err = errors.New("no answer")
		}
		return a.status, a.err
	case <-ctx.Done():
		return 0, fmt.Errorf("the whole body went out (30 s) and the request was not cut off: %w", ctx.Err())
	}
}

// trickleH2 sends a request over c (h2c) whose body comes a byte every
// 100 ms, and returns its answer.
func trickleH2(ctx context.Context, c *http.Client, base, secret, path string) (gwtest.Response, error) {
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() {
		pace := time.NewTicker(100 * time.Millisecond)
		defer pace.Stop()
		for i := 0; i < len(trickleBody); i++ {
			select {
			case <-ctx.Done():
				return
			case <-pace.C:
			}
			if _, err := pw.Write([]byte{trickleBody[i]}); err != nil {
				return
			}
		}
		pw.Close()
	}()
	req, err := http.NewRequestWithContext(ctx, "POST", base+path, pr)
	if err != nil {
		return gwtest.Response{}, err
	}
	req.ContentLength = int64(len(trickleBody))
	req.Header.Set("Content-Type", "application/json")
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	return gwtest.Send(c, req)
}

func h2cClient() *http.Client {
	return &http.Client{Transport: &http.Transport{Protocols: h2cOnly()}}
}

// TestSlowBodiesAreCutOff: bodies that come a byte every 100 ms (30 s in
// all) are cut off after --body-timeout (1 s here), over HTTP/1.1 and h2c,
// with and without a token: a request whose handler reads the body answers
// 408 body_timeout; one refused before (401) has its connection closed
// instead of read to the end. Then the gateway's goroutines are back to
// what they were. Such a body held its goroutine as long as it trickled.
func TestSlowBodiesAreCutOff(t *testing.T) {
	// Serial: counts the binary's goroutines (runtime.NumGoroutine).
	file, secrets := newTokensFile(t)
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{Extra: []string{"--auth-file", file, "--body-timeout", "1s"}})
	lease := newLeaseWith(t, g.URL, secrets["writer"])
	http.DefaultClient.CloseIdleConnections()
	baseline := runtime.NumGoroutine()

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	h2 := h2cClient()
	defer h2.CloseIdleConnections()
	var wg sync.WaitGroup
	errs := make(chan error, 60)
	for i := range 60 {
		wg.Go(func() {
			acquire := "/v1/locks/slow-" + strconv.Itoa(i) + "/acquire"
			var status int
			var err error
			var what string
			switch i % 3 {
			case 0:
				what = "HTTP/1.1 without a token"
				status, err = trickleH1(ctx, g.URL, "", "/v1/leases", nil)
				if err == nil && status != 401 {
					err = fmt.Errorf("status %d, want 401", status)
				}
			case 1:
				what = "HTTP/1.1 with a token"
				status, err = trickleH1(ctx, g.URL, secrets["writer"], acquire, nil)
				if err == nil && status != 408 {
					err = fmt.Errorf("status %d, want 408", status)
				}
			case 2:
				what = "h2c with a token"
				var r gwtest.Response
				r, err = trickleH2(ctx, h2, g.URL, secrets["writer"], acquire)
				if err == nil && (r.Status != 408 || !strings.Contains(string(r.Body), `"body_timeout"`)) {
					err = fmt.Errorf("%d %s, want 408 body_timeout", r.Status, r.Body)
				}
			}
			if err != nil {
				errs <- fmt.Errorf("a slow body, %s: %w", what, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	mustStatus(t, doAs(t, g.URL, secrets["writer"], "POST", "/v1/locks/slow-1/acquire", map[string]any{"lease": lease}), 200,
		"an acquire sent at once")
	h2.CloseIdleConnections()
	http.DefaultClient.CloseIdleConnections()
	gwtest.Eventually(t, 10*time.Second, func() error {
		if n := runtime.NumGoroutine(); n > baseline {
			return fmt.Errorf("%d goroutines, %d before the slow bodies", n, baseline)
		}
		return nil
	})
}

// newLeaseWith makes a lease of 1m with secret ("" for none).
func newLeaseWith(t *testing.T, base, secret string) string {
	t.Helper()
	r := doAs(t, base, secret, "POST", "/v1/leases", map[string]any{"ttl": "1m"})
	mustStatus(t, r, 201, "lease")
	return r.JSON(t)["id"].(string)
}

// TestWaitsOutliveTheBodyTimeout: the body deadline covers the body only:
// waiting acquires with a body, over HTTP/1.1 and h2c, wait their whole
// ?wait= (3 s, past the 1 s --body-timeout) and answer 409 timeout, as a
// wait does; over HTTP/1.1 a read deadline left on the connection would cut
// them (net/http reads on to notice a hang-up, and ends the request).
func TestWaitsOutliveTheBodyTimeout(t *testing.T) {
	t.Parallel()
	g := gwtest.StartGateway(t, gwtest.GatewayOptions{Extra: []string{"--body-timeout", "1s"}})
	holder := newLease(t, g.URL, "1m", "holder")
	mustStatus(t, acquire(t, g.URL, "held", holder, "0s"), 200, "hold")
	waiter := newLease(t, g.URL, "1m", "waiter")
	body, _ := json.Marshal(map[string]any{"lease": waiter})
	for _, tc := range []struct {
		name   string
		client *http.Client
	}{{"HTTP/1.1", &http.Client{Transport: &http.Transport{}}}, {"h2c", h2cClient()}} {
		start := time.Now()
		resp, err := tc.client.Post(g.URL+"/v1/locks/held/acquire?wait=3s", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("%s: a waiting acquire: %v", tc.name, err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 409 || !strings.Contains(string(data), `"timeout"`) {
			t.Errorf("%s: a waiting acquire: %d %s, want 409 timeout", tc.name, resp.StatusCode, data)
		}
		if waited := time.Since(start); waited < 3*time.Second {
			t.Errorf("%s: the wait of 3s ended after %s", tc.name, waited)
		}
		tc.client.CloseIdleConnections()
	}
}

// fromAddr is a client whose connections come from the loopback address
// ip (any of 127.0.0.0/8), to play another client address.
func fromAddr(ip string) (*http.Client, net.Addr) {
	local := &net.TCPAddr{IP: net.ParseIP(ip)}
	d := &net.Dialer{LocalAddr: local}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}, local
}

// TestRequestsUnderWayPerClient: every request that holds a handler counts
// against its token's cap on requests under way (--max-requests-per-token),
// or, without a token, its client address's: three slow bodies of one
// token (or address) leave it no room, and other tokens (addresses), and
// /readyz, are served as usual. One token could hold any number.
func TestRequestsUnderWayPerClient(t *testing.T) {
	t.Parallel()
	file, secrets := newTokensFile(t)
	extra := []string{"--max-requests-per-token", "3", "--body-timeout", "1m"}
	for _, tc := range []struct {
		name             string
		tokens           bool
		greedy, innocent string // token names, or client addresses
	}{
		{"tokens on", true, "writer", "other"},
		{"tokens off", false, "127.0.0.2", "127.0.0.3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := gwtest.GatewayOptions{Extra: extra}
			if tc.tokens {
				opts.Extra = append([]string{"--auth-file", file}, extra...)
			}
			g := gwtest.StartGateway(t, opts)
			greedy, innocent, secret, innocentSecret := http.DefaultClient, http.DefaultClient, "", ""
			var local net.Addr
			if tc.tokens {
				secret, innocentSecret = secrets[tc.greedy], secrets[tc.innocent]
			} else {
				greedy, local = fromAddr(tc.greedy)
				innocent, _ = fromAddr(tc.innocent)
			}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for range 3 {
				wg.Go(func() {
					_, _ = trickleH1(ctx, g.URL, secret, "/v1/leases", local)
				})
			}
			// The slow bodies are in once the scrape (of another client)
			// counts 3 requests under way besides itself.
			gwtest.Eventually(t, 10*time.Second, func() error {
				if n := metricValueAs(t, g.URL, secrets["reader"], "zkgate_requests_under_way"); n != 4 {
					return fmt.Errorf("%v requests under way, want 3 and the scrape", n)
				}
				return nil
			})
			wantTooMany(t, sendWith(t, greedy, "GET", g.URL+"/v1/locks", secret, nil), "max-requests-per-token", "a fourth request")
			mustStatus(t, sendWith(t, greedy, "GET", g.URL+"/readyz", "", nil), 200, "readyz at the cap")
			mustStatus(t, sendWith(t, innocent, "GET", g.URL+"/v1/locks", innocentSecret, nil), 200, "another client at the cap")
			cancel()
			wg.Wait()
			gwtest.Eventually(t, 10*time.Second, func() error {
				if r := sendWith(t, greedy, "GET", g.URL+"/v1/locks", secret, nil); r.Status != 200 {
					return fmt.Errorf("once the slow bodies are gone: %d, want 200", r.Status)
				}
				return nil
			})
		})
	}
}

// sendRaw sends a request with the given headers ("Host" sets the Host
// header) and body (sent with Content-Type ct unless ct is empty).
func sendRaw(t *testing.T, base, method, path string, header map[string]string, ct, body string) gwtest.Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	return gwtest.MustSend(t, http.DefaultClient, req)
}

// TestBrowserRequestsRefused: what a browser says of a request that
// changes something decides whether it is served. Another site's
// (Sec-Fetch-Site cross-site or same-site, or a foreign or opaque Origin)
// is 403 with or without tokens; without tokens, a page that names the
// gateway by a DNS name may be an attacker's rebound to it, 403 too; a
// body of a type a form sends is 415 from a browser; clients that send
// neither header (curl, the clients) are served as they were, curl's form
// type included.
func TestBrowserRequestsRefused(t *testing.T) {
	t.Parallel()
	file, secrets := newTokensFile(t)
	off := gwtest.StartGateway(t, gwtest.GatewayOptions{})
	on := gwtest.StartGateway(t, gwtest.GatewayOptions{Extra: []string{"--auth-file", file}})
	hostOf := func(g *gwtest.Gateway) string { return strings.TrimPrefix(g.URL, "http://") }
	port := func(g *gwtest.Gateway) string { return hostOf(g)[strings.LastIndexByte(hostOf(g), ':'):] }
	const acquire, produce = "/v1/locks/b/acquire", "/v1/queues/b/items"
	json := `{"ttl":"1m"}`
	cases := []struct {
		name         string
		g            *gwtest.Gateway
		path         string
		header       map[string]string
		ct, body     string
		status       int
		code, detail string
	}{
		{"another site", off, acquire, map[string]string{"Sec-Fetch-Site": "cross-site"}, "application/json", json, 403, "forbidden", "another site"},
		{"the same site, another origin", off, acquire, map[string]string{"Sec-Fetch-Site": "same-site"}, "application/json", json, 403, "forbidden", "another site"},
		{"an old browser, another origin", off, produce, map[string]string{"Origin": "http://evil.example"}, "application/octet-stream", "x", 403, "forbidden", "another origin"},
		{"an old browser, an opaque origin", off, acquire, map[string]string{"Origin": "null"}, "application/json", json, 403, "forbidden", "another origin"},
		{"a take from another site", off, "/v1/queues/b/take", map[string]string{"Sec-Fetch-Site": "cross-site"}, "", "", 403, "forbidden", "another site"},
		{"DNS rebinding", off, acquire, map[string]string{"Sec-Fetch-Site": "same-origin", "Host": "evil.example" + port(off)}, "application/json", json, 403, "forbidden", "DNS rebinding"},
		{"DNS rebinding, an old browser", off, acquire, map[string]string{"Origin": "http://evil.example" + port(off), "Host": "evil.example" + port(off)}, "application/json", json, 403, "forbidden", "DNS rebinding"},
		{"the gateway's page, a form type", off, acquire, map[string]string{"Sec-Fetch-Site": "same-origin"}, "text/plain", json, 415, "unsupported_media_type", "application/json"},
		{"the gateway's page, an item as a form", off, produce, map[string]string{"Sec-Fetch-Site": "same-origin"}, "multipart/form-data; boundary=x", "x", 415, "unsupported_media_type", ""},
		{"the gateway's page", off, acquire, map[string]string{"Sec-Fetch-Site": "same-origin"}, "application/json", json, 200, "", ""},
		{"the gateway's page at localhost", off, acquire, map[string]string{"Sec-Fetch-Site": "same-origin", "Host": "localhost" + port(off)}, "application/json", json, 200, "", ""},
		{"an old browser, the gateway's origin", off, produce, map[string]string{"Origin": off.URL}, "application/octet-stream", "x", 201, "", ""},
		{"curl -d", off, acquire, nil, "application/x-www-form-urlencoded", json, 200, "", ""},
		{"curl --data-binary", off, produce, nil, "application/x-www-form-urlencoded", "x", 201, "", ""},
		{"a client's take", off, "/v1/queues/b/take", nil, "", "", 200, "", ""},
		{"tokens: another site", on, acquire, map[string]string{"Sec-Fetch-Site": "cross-site", "Authorization": "Bearer " + secrets["writer"]}, "application/json", json, 403, "forbidden", "another site"},
		{"tokens: a DNS name", on, acquire, map[string]string{"Sec-Fetch-Site": "same-origin", "Host": "gw.example" + port(on), "Authorization": "Bearer " + secrets["writer"]}, "application/json", json, 200, "", ""},
	}
	for i, c := range cases {
		if c.path == acquire { // a lock of its own: an acquire holds it
			c.path = "/v1/locks/b" + strconv.Itoa(i) + "/acquire"
		}
		r := sendRaw(t, c.g.URL, "POST", c.path, c.header, c.ct, c.body)
		if c.code == "" {
			mustStatus(t, r, c.status, c.name)
			continue
		}
		if p := wantProblem(t, r, c.status, c.code, c.name); p != nil && !strings.Contains(p["detail"].(string), c.detail) {
			t.Errorf("%s: detail %q, want it to say %q", c.name, p["detail"], c.detail)
		}
	}
}
