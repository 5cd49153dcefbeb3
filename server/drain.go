package server

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/zkgate/zkgate/handlers"
)

// drain is the state of a gateway on its way out. Until it ends, holders
// keep their leases and release normally, but nothing new starts here: a
// load balancer sends new work elsewhere once /readyz answers 503.
type drain struct {
	ends      atomic.Pointer[time.Time] // nil while not draining
	leasesEnd atomic.Bool               // the leases end with the drain: none is handed over
}

// start begins the drain, to end at ends; leasesEnd says that the
// gateway's leases end then (they are not handed over).
func (d *drain) start(ends time.Time, leasesEnd bool) {
	d.leasesEnd.Store(leasesEnd)
	d.ends.Store(&ends)
}

// until is when the drain ends, and whether the gateway drains.
func (d *drain) until() (time.Time, bool) {
	if e := d.ends.Load(); e != nil {
		return *e, true
	}
	return time.Time{}, false
}

// draining says whether the gateway drains.
func (d *drain) draining() bool { return d.ends.Load() != nil }

// leaseEnds is when every lease of the gateway ends, if they end with the
// drain (see handlers.LeaseEndsHeader).
func (d *drain) leaseEnds() (time.Time, bool) {
	if e := d.ends.Load(); e != nil && d.leasesEnd.Load() {
		return *e, true
	}
	return time.Time{}, false
}

// errDraining answers whatever would start something new on a draining
// gateway.
var errDraining = handlers.ErrDraining

// refuse wraps a handler that starts something new (a lease, a hold, a
// wait): a draining gateway answers it 503 with Retry-After. Holders'
// releases, keepalives and plain reads are not wrapped.
func (d *drain) refuse(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.draining() {
			handlers.Problem(w, r, errDraining.Code, errDraining.Detail) // 503, Retry-After
			return
		}
		next.ServeHTTP(w, r)
	})
}

// refuseBlocking is refuse for blocking reads only: a GET with an index is
// a wait; a plain GET is answered.
func (d *drain) refuseBlocking(next http.Handler) http.Handler {
	refused := d.refuse(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("index") {
			refused.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}
