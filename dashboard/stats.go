package dashboard

import (
	"bufio"
	"context"
	"crypto/tls"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zkgate/zkgate/views"
	"github.com/zkgate/zkgate/zkserver"
)

// rateWindow is how many one-second samples the request rate keeps.
const rateWindow = 60

// rateSampler turns the gateway's own counters into rates: the hub samples
// it once a second while a dashboard is open.
type rateSampler struct {
	// counts reads the counters: API requests, and grants by kind (nil:
	// no rates).
	counts func() (api float64, grants map[string]float64)

	mu       sync.Mutex
	last     time.Time
	api      float64            // API requests counted at last
	grants   map[string]float64 // grants by kind counted at last
	history  []float64          // API requests per second
	perKind  map[string]float64 // grants per second by kind, last sample
	totalAll map[string]float64
}

// sample reads the counters and records the rate since the last sample.
func (r *rateSampler) sample(now time.Time) {
	if r.counts == nil {
		return
	}
	api, grants := r.counts()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.last.IsZero() {
		secs := now.Sub(r.last).Seconds()
		if secs <= 0 {
			return
		}
		r.history = append(r.history, (api-r.api)/secs)
		if len(r.history) > rateWindow {
			r.history = r.history[len(r.history)-rateWindow:]
		}
		r.perKind = map[string]float64{}
		for k, v := range grants {
			r.perKind[k] = (v - r.grants[k]) / secs
		}
	}
	r.last, r.api, r.grants, r.totalAll = now, api, grants, grants
}

// reset forgets the history, when the hub stops sampling.
func (r *rateSampler) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last, r.history, r.perKind = time.Time{}, nil, nil
}

// rates are the current rates: the API rate is averaged over 5 seconds.
func (r *rateSampler) rates() views.Rates {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := views.Rates{History: slices.Clone(r.history)}
	recent := r.history[max(len(r.history)-5, 0):]
	for _, v := range recent {
		out.API += v / float64(len(recent))
	}
	for _, k := range sortedKeys(r.totalAll) {
		out.ByKind = append(out.ByKind, views.Rate{Name: k, PerSec: r.perKind[k], Total: r.totalAll[k]})
		out.Grants += r.perKind[k]
	}
	return out
}

// ensemble asks each server of the connect string for its mode with the
// `srvr` four-letter word, at most every few seconds.
type ensemble struct {
	servers []string
	tls     *tls.Config // nil: plain TCP

	mu   sync.Mutex
	at   time.Time
	last []views.Server
}

const ensembleEvery = 5 * time.Second

// cached returns the servers' state as last asked.
func (e *ensemble) cached() []views.Server {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.last == nil {
		out := make([]views.Server, len(e.servers))
		for i, s := range e.servers {
			out[i] = views.Server{Addr: s}
		}
		return out
	}
	return e.last
}

// get returns the servers' state, asking them again (asked) if it is old.
func (e *ensemble) get(ctx context.Context) (servers []views.Server, asked bool) {
	e.mu.Lock()
	if time.Since(e.at) < ensembleEvery && e.last != nil {
		defer e.mu.Unlock()
		return e.last, false
	}
	e.mu.Unlock()
	out := make([]views.Server, len(e.servers))
	var wg sync.WaitGroup
	for i, addr := range e.servers {
		wg.Go(func() {
			qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			reply, err := zkserver.FourLetterWordTLS(qctx, addr, "srvr", e.tls)
			out[i] = parseSrvr(addr, reply, err)
		})
	}
	wg.Wait()
	e.mu.Lock()
	e.at, e.last = time.Now(), out
	e.mu.Unlock()
	return out, true
}

// parseSrvr reads the reply of `srvr`.
func parseSrvr(addr, reply string, err error) views.Server {
	s := views.Server{Addr: addr}
	if err != nil {
		s.Err = "no answer"
		return s
	}
	sc := bufio.NewScanner(strings.NewReader(reply))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "Zookeeper version":
			s.Version, _, _ = strings.Cut(v, "-")
		case "Latency min/avg/max":
			s.Latency = roundLatency(v)
		case "Connections":
			s.Connections = v
		case "Outstanding":
			s.Outstanding = v
		case "Zxid":
			s.Zxid = v
		case "Mode":
			s.Mode = v
		case "Node count":
			s.NodeCount = v
		}
	}
	if s.Mode == "" {
		s.Err = "not serving"
		if strings.Contains(reply, "whitelist") {
			s.Err = "srvr is not whitelisted"
		}
	}
	return s
}

// roundLatency shortens "0/1.7826/10" to "0/1.8/10".
func roundLatency(v string) string {
	parts := strings.Split(v, "/")
	for i, p := range parts {
		if f, err := strconv.ParseFloat(p, 64); err == nil {
			parts[i] = strconv.FormatFloat(f, 'f', -1, 64)
			if f != float64(int64(f)) {
				parts[i] = strconv.FormatFloat(f, 'f', 1, 64)
			}
		}
	}
	return strings.Join(parts, "/")
}
