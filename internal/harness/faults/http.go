//go:build linux

package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"time"
)

// answer is a gateway's answer as a client saw it. Status 0 means no
// answer: the connection failed or the client's time ran out.
type answer struct {
	Status     int
	Code       string // the problem's code
	Reason     string // a lease_expired problem's reason
	Body       []byte
	Header     http.Header
	Sent, Recv time.Time
	Gateway    int
	// Life is the gateway's process that the request went to (see
	// gateway.life); -1 when the gateway was restarted meanwhile.
	Life int
	Err  error
}

type problem struct {
	Code   string `json:"code"`
	Reason string `json:"reason"`
}

// request is one HTTP exchange with a random gateway.
type request struct {
	kind   string // for the tally: acquire, release, keepalive...
	method string
	path   string
	body   any // JSON, or []byte sent raw
	// wait is the server-side wait the request asked for: the client gives
	// the exchange that much plus a margin before it hangs up.
	wait time.Duration
	// gateway, when >= 0, picks the gateway instead of chance.
	gateway int
	// timeout, when set, replaces wait plus the margin.
	timeout time.Duration
}

// send sends req to a random gateway (or req.gateway) and reads the
// answer, counting it in the tally.
func (r *runner) send(ctx context.Context, rng *rand.Rand, req request) answer {
	gi := req.gateway
	if gi < 0 || gi >= len(r.cl.gateways) {
		gi = rng.IntN(len(r.cl.gateways))
	}
	a := r.exchange(ctx, gi, req)
	r.hist.answer(req.kind, a)
	r.requests.Add(1)
	r.countRequest()
	return a
}

func (r *runner) exchange(ctx context.Context, gi int, req request) (a answer) {
	g := r.cl.gateways[gi]
	life := g.life()
	a = answer{Gateway: gi, Life: life}
	defer func() {
		if g.life() != life {
			a.Life = -1
		}
	}()
	timeout := req.timeout
	if timeout == 0 {
		timeout = req.wait + r.cfg.RequestMargin
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	ct := ""
	switch b := req.body.(type) {
	case nil:
	case []byte:
		rd, ct = bytes.NewReader(b), "application/octet-stream"
	default:
		data, _ := json.Marshal(b)
		rd, ct = bytes.NewReader(data), "application/json"
	}
	base := g.URL()
	hr, err := http.NewRequestWithContext(ctx, req.method, base+req.path, rd)
	if err != nil {
		a.Err = err
		return a
	}
	if ct != "" {
		hr.Header.Set("Content-Type", ct)
	}
	a.Sent = time.Now()
	resp, err := r.http.Do(hr)
	if err != nil {
		a.Recv, a.Err = time.Now(), err
		return a
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	a.Recv = time.Now()
	if err != nil {
		a.Err = err // the answer was cut short: as good as none
		return a
	}
	a.Status, a.Body, a.Header = resp.StatusCode, body, resp.Header
	if resp.StatusCode >= 400 {
		var p problem
		if json.Unmarshal(body, &p) == nil {
			a.Code, a.Reason = p.Code, p.Reason
		}
	}
	return a
}

func newHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}}
}

// The headers a gateway puts on its answers about leases.
const (
	headerTime      = "X-Zkgate-Time"       // the gateway's clock when it answered
	headerLeaseEnds = "X-Zkgate-Lease-Ends" // a draining gateway: when all its leases end
	headerServedBy  = "X-Zkgate-Served-By"  // the lease's own gateway, when the request was passed on to it
)

// onClientClock converts t, a time on the clock of the gateway that gave
// a, to the client's: sent + (t - X-Zkgate-Time), as docs/api.md asks of a
// client whose clock may be set differently. The gateway read its clock
// after the request was sent, so the result is never later than t would be
// on one clock. False when the answer carries no X-Zkgate-Time.
func (a answer) onClientClock(t time.Time) (time.Time, bool) {
	now, err := time.Parse(time.RFC3339Nano, a.Header.Get(headerTime))
	if err != nil {
		return time.Time{}, false
	}
	return a.Sent.Add(t.Sub(now)), true
}

// leaseEnds is when a draining gateway's leases end, on the client's
// clock; false when the answer carries no X-Zkgate-Lease-Ends (or no
// X-Zkgate-Time to convert it with).
func (a answer) leaseEnds() (time.Time, bool) {
	v := a.Header.Get(headerLeaseEnds)
	if v == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, false
	}
	return a.onClientClock(t)
}
