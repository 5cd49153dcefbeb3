package benchfloor

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// maxBody bounds a request's body: the bench's are under 100 bytes.
const maxBody = 64 << 10

// serveNet answers f's routes with a minimal HTTP/1.1 server on the net
// package: a goroutine per connection with a bufio reader and writer, the
// request line and headers read with ReadSlice, bodies by Content-Length
// only (a chunked body is answered 501 and the connection closed), the
// answer with Date and Content-Length; keep-alive unless the client sends
// Connection: close.
func serveNet(ctx context.Context, ln net.Listener, f *floor) error {
	var (
		mu    sync.Mutex
		conns = map[net.Conn]bool{}
		wg    sync.WaitGroup
	)
	stop := context.AfterFunc(ctx, func() {
		_ = ln.Close()
		mu.Lock()
		for c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
	})
	defer stop()
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		mu.Lock()
		conns[c] = true
		mu.Unlock()
		wg.Go(func() {
			serveConn(c, f)
			mu.Lock()
			delete(conns, c)
			mu.Unlock()
			_ = c.Close()
		})
	}
}

// serveConn answers the requests of one connection until it ends or one
// cannot be read.
func serveConn(c net.Conn, f *floor) {
	br, bw := bufio.NewReader(c), bufio.NewWriter(c)
	for {
		method, target, length, keep, err := readHead(br)
		if err != nil {
			var fail *failure
			if errors.As(err, &fail) {
				writeAnswer(bw, 0, nil, fail, false)
				_ = bw.Flush()
			}
			return
		}
		body := make([]byte, length)
		if _, err := io.ReadFull(br, body); err != nil {
			return
		}
		status, v, err := route(f, method, target, body)
		writeAnswer(bw, status, v, err, keep)
		if bw.Flush() != nil || !keep {
			return
		}
	}
}

var (
	errChunked  = &failure{http.StatusNotImplemented, "only bodies with a Content-Length are read"}
	errTooLarge = &failure{http.StatusRequestEntityTooLarge, "the body is too large"}
	errBadHead  = &failure{http.StatusBadRequest, "malformed request"}
)

// readHead reads a request line and its headers: the method, the target,
// the body's length and whether the connection stays open after the answer.
func readHead(br *bufio.Reader) (method, target string, length int, keep bool, err error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return "", "", 0, false, err
	}
	parts := strings.Fields(string(line))
	if len(parts) != 3 || !strings.HasPrefix(parts[2], "HTTP/1.") {
		return "", "", 0, false, errBadHead
	}
	method, target, keep = parts[0], parts[1], parts[2] == "HTTP/1.1"
	for {
		h, err := br.ReadSlice('\n')
		if err != nil {
			return "", "", 0, false, errBadHead
		}
		h = bytes.TrimRight(h, "\r\n")
		if len(h) == 0 {
			return method, target, length, keep, nil
		}
		name, value, ok := bytes.Cut(h, []byte(":"))
		if !ok {
			return "", "", 0, false, errBadHead
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			n, err := strconv.Atoi(string(value))
			if err != nil || n < 0 {
				return "", "", 0, false, errBadHead
			}
			if n > maxBody {
				return "", "", 0, false, errTooLarge
			}
			length = n
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return "", "", 0, false, errChunked
		case bytes.EqualFold(name, []byte("Connection")):
			keep = !bytes.EqualFold(value, []byte("close"))
		}
	}
}

// route answers one request: its status and value, or an error.
func route(f *floor, method, target string, body []byte) (int, any, error) {
	rest, ok := strings.CutPrefix(target, "/v1/")
	switch {
	case method == http.MethodGet && target == "/readyz":
		return http.StatusOK, nil, nil
	case !ok:
	case method == http.MethodPost && rest == "leases":
		var req leaseRequest
		if json.Unmarshal(body, &req) != nil {
			return 0, nil, errBadBody
		}
		return http.StatusCreated, f.createLease(), nil
	case method == http.MethodDelete && strings.HasPrefix(rest, "leases/"):
		return http.StatusNoContent, nil, f.revokeLease(strings.TrimPrefix(rest, "leases/"))
	case method == http.MethodPost && strings.HasPrefix(rest, "locks/"):
		name, op, _ := strings.Cut(strings.TrimPrefix(rest, "locks/"), "/")
		if name == "" || op != "acquire" && op != "release" {
			break
		}
		var req lockRequest
		if json.Unmarshal(body, &req) != nil {
			return 0, nil, errBadBody
		}
		if op == "release" {
			return http.StatusNoContent, nil, f.release(name, req.Lease)
		}
		g, err := f.acquire(name, req.Lease)
		return http.StatusOK, g, err
	}
	return 0, nil, errNotFound
}

// writeAnswer writes an answer of status with v as its JSON body (nil:
// none), or err as a problem.
func writeAnswer(bw *bufio.Writer, status int, v any, err error, keep bool) {
	ctype := "application/json"
	if err != nil {
		st, title := statusOf(err)
		status, v, ctype = st, problem{Title: title, Status: st}, "application/problem+json"
	}
	var body []byte
	if v != nil {
		body, _ = json.Marshal(v)
	}
	bw.WriteString("HTTP/1.1 ")
	bw.WriteString(strconv.Itoa(status))
	bw.WriteByte(' ')
	bw.WriteString(http.StatusText(status))
	bw.WriteString("\r\nDate: ")
	bw.Write(time.Now().UTC().AppendFormat(make([]byte, 0, 32), http.TimeFormat))
	if !keep {
		bw.WriteString("\r\nConnection: close")
	}
	if status != http.StatusNoContent {
		bw.WriteString("\r\nContent-Type: ")
		bw.WriteString(ctype)
		bw.WriteString("\r\nContent-Length: ")
		bw.WriteString(strconv.Itoa(len(body)))
	}
	bw.WriteString("\r\n\r\n")
	bw.Write(body)
}
