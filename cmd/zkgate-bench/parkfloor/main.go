//go:build linux

// Command parkfloor measures what net/http alone costs per parked request,
// the floor under the gateway's memory per waiter (make bench, phase
// waiters): a server whose handler reads the small body and then parks,
// either at once (shallow), or under a chain of frames as deep as a waiting
// acquire's in the gateway (deep), or after such a chain has returned
// (unwound: a handler that did deep work and parks high up). N clients each
// send one request (HTTP/1.1: a connection each; h2c: HTTP/2 with prior
// knowledge, many streams per connection); once all are parked, the server
// reports its VmRSS and its Go stack and heap in use per parked request,
// after three GCs (which shrink the stacks they can).
//
//	go run ./cmd/zkgate-bench/parkfloor [-n 10000] [-proto h1|h2c] [-mode shallow|deep|unwound]
//
// The server runs in a child process, so that the figures are its own.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	n := flag.Int("n", 10000, "parked requests")
	proto := flag.String("proto", "h2c", "h1 or h2c")
	mode := flag.String("mode", "shallow", "where the handler parks: shallow, deep or unwound")
	serve := flag.Bool("serve", false, "run as the server (the parent starts it)")
	flag.Parse()
	if *proto != "h1" && *proto != "h2c" || *mode != "shallow" && *mode != "deep" && *mode != "unwound" {
		fmt.Fprintln(os.Stderr, "parkfloor: -proto is h1 or h2c, -mode is shallow, deep or unwound")
		os.Exit(2)
	}
	if *serve {
		server(*n, *mode)
		return
	}
	if err := client(*n, *proto, *mode); err != nil {
		fmt.Fprintln(os.Stderr, "parkfloor:", err)
		os.Exit(1)
	}
}

var (
	release = make(chan struct{})
	parked  atomic.Int64
)

// deep parks (or returns, when park is false) under n frames of about 280
// bytes each: 18 of them are about the 4.7 KiB a waiting acquire parks under
// in the gateway (net/http, chi, the handler, the recipe).
//
//go:noinline
func deep(n int, park bool) int {
	var buf [256]byte
	buf[n%256] = byte(n)
	if n == 0 {
		if park {
			parked.Add(1)
			<-release
		}
		return int(buf[3])
	}
	return deep(n-1, park) + int(buf[n%256])
}

func server(n int, mode string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("error", err)
		return
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch mode {
		case "shallow":
			parked.Add(1)
			<-release
		case "deep":
			deep(18, true)
		case "unwound":
			deep(18, false)
			parked.Add(1)
			<-release
		}
		_, _ = w.Write([]byte("ok"))
	})}
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Protocols = &p
	go func() { _ = srv.Serve(ln) }()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	rss0 := vmRSS()
	fmt.Println("http://" + ln.Addr().String() + "/")
	for parked.Load() < int64(n) {
		time.Sleep(10 * time.Millisecond)
	}
	for range 3 {
		runtime.GC()
		time.Sleep(50 * time.Millisecond)
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	per := func(b int64) float64 { return float64(b) / 1024 / float64(n) }
	fmt.Printf("%.1f %.1f %.1f\n", per(vmRSS()-rss0), per(int64(after.StackInuse)-int64(before.StackInuse)),
		per(int64(after.HeapInuse)-int64(before.HeapInuse)))
	close(release)
	time.Sleep(time.Second)
}

// vmRSS is this process's resident set in bytes.
func vmRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			var kb int64
			_, _ = fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
			return kb << 10
		}
	}
	return 0
}

func client(n int, proto, mode string) error {
	cmd := exec.Command(os.Args[0], "-serve", "-n", fmt.Sprint(n), "-mode", mode, "-proto", proto)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := bufio.NewScanner(out)
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), "http://") {
		return fmt.Errorf("the server did not start: %q", lines.Text())
	}
	url := lines.Text()
	tr := &http.Transport{MaxIdleConnsPerHost: n}
	if proto == "h2c" {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		tr.Protocols = &p
	}
	c := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	var failed atomic.Int64
	var firstErr atomic.Value
	for i := range n {
		if i%100 == 99 {
			time.Sleep(10 * time.Millisecond) // a ramp: the listen backlog is finite
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := c.Post(url, "application/json", strings.NewReader(`{"lease":"x"}`))
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err.Error())
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}()
	}
	if !lines.Scan() {
		return fmt.Errorf("the server ended without a report")
	}
	var rss, stack, heap float64
	if _, err := fmt.Sscanf(lines.Text(), "%f %f %f", &rss, &stack, &heap); err != nil {
		return fmt.Errorf("bad report %q", lines.Text())
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		return fmt.Errorf("%d of %d requests failed, the first with: %v", f, n, firstErr.Load())
	}
	fmt.Printf("net/http alone, %d parked requests over %s, handler parks %s: %.1f KiB VmRSS, %.1f KiB stack + %.1f KiB heap in use per request\n",
		n, proto, mode, rss, stack, heap)
	return nil
}
