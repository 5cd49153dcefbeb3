package recipes

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/zkgate/zkgate/internal/zk"
)

// Where a lease is: this gateway's table does not hold it, so it was handed
// over from here (movedTo), or its record in ZooKeeper names the gateway
// that keeps it, or its history says why it ended (history.go).

// Locate finds what the other gateways know of lease id: the live gateway
// that keeps it, or, from its history, the lease_expired error of a lease
// that has ended; no Keeper and nil when no gateway ever made it (or its
// history was swept). A gateway that cannot read ZooKeeper now cannot
// tell: it answers unavailable, never "not found".
//
// It first syncs its ZooKeeper server with the leader, so that a lease made
// a moment ago through another gateway (whose server may be ahead of ours)
// is found. Then it reads the history before the record: the two are made
// in one transaction, and ended in one (the record deleted, the reason
// written), so a record gone after a history read without a reason is a
// lease that ended in between, whose reason a second read of the history
// tells (none: its gateway's session went).
//
// With the gateways' shared secret, the record and the registration of its
// gateway must check out (see auth/nodeproof): one that does not is not a gateway's
// word, and the lease is not located through it (unavailable, logged).
func (ls *Leases) Locate(id string) (Keeper, error) {
	if len(id) < 2 {
		return Keeper{}, nil
	}
	if k, ok := ls.movedTo(id); ok {
		return k, nil // handed over from here: known without ZooKeeper, which may be out of reach now
	}
	if st, _, _ := ls.sess.Status(); st != StateLive {
		return Keeper{}, unavailable()
	}
	conn := ls.sess.Conn()
	if _, err := conn.Sync(ls.sess.Root()); err != nil {
		return Keeper{}, unavailable()
	}
	hist, err := ls.readHistory(conn, id)
	if err != nil {
		return Keeper{}, err
	}
	if hist != nil && hist.Reason != "" {
		return Keeper{}, leaseEnded(id, hist.Reason)
	}
	raw, recStat, err := conn.Get(ls.recordPath(id))
	switch {
	case errors.Is(err, zk.ErrNoNode):
		if hist == nil {
			return Keeper{}, nil // no gateway ever made it, or long ago
		}
		if hist, err = ls.readHistory(conn, id); err != nil {
			return Keeper{}, err
		}
		if hist == nil || hist.Reason == "" {
			return Keeper{}, leaseEnded(id, EndSessionLost) // its gateway's session went, and the record with it
		}
		return Keeper{}, leaseEnded(id, hist.Reason)
	case err != nil:
		return Keeper{}, unavailable()
	}
	gateway, proven := ls.recordGateway(id, recStat, raw)
	if gateway == "" {
		return Keeper{}, nil
	}
	if !proven {
		return Keeper{}, notProven(id, "its record")
	}
	if gateway == ls.cfg.GatewayID {
		// Ours, yet not in the table: its ending is under way.
		return Keeper{}, unavailable()
	}
	regPath := ls.sess.Root() + "/gateways/" + gateway
	raw, regStat, err := conn.Get(regPath)
	if err != nil {
		// Unreadable, or its gateway is not registered at this moment
		// (the two go with the same session): ask again shortly.
		return Keeper{}, unavailable()
	}
	var gw struct {
		Advertise string `json:"advertise"`
		Proof     string `json:"proof"`
	}
	if json.Unmarshal(raw, &gw) != nil {
		return Keeper{}, nil
	}
	if !ls.proofs.RegistrationOK(regPath, gateway, regStat, raw, gw.Advertise, gw.Proof) {
		return Keeper{}, notProven(id, "the registration of its gateway "+quote(gateway))
	}
	if self := ls.advertise.Load(); self != nil && gw.Advertise == *self {
		// The gateway that keeps it was at this gateway's address, where
		// this one serves now: it is gone, and its leases with it, though
		// ZooKeeper has not expired its session yet.
		return Keeper{}, &Error{Code: CodeLeaseExpired, Extra: map[string]any{"reason": EndSessionLost},
			Detail: fmt.Sprintf("lease %s has ended: %s (its gateway %s at %s is gone; this gateway serves that address now)",
				quote(id), EndSessionLost, gateway, gw.Advertise)}
	}
	return Keeper{Gateway: gateway, Advertise: gw.Advertise}, nil
}

// notProven is the error of a lease whose record, or its gateway's
// registration, does not check out with the gateways' shared secret.
func notProven(id, what string) *Error {
	return &Error{Code: CodeUnavailable, Detail: fmt.Sprintf("lease %s is not located: %s in ZooKeeper does not check out "+
		"with --peer-secret-file (written by something that does not hold the gateways' secret, or by a gateway with another one)",
		quote(id), what)}
}

// readHistory reads the history of lease id: nil when there is none.
func (ls *Leases) readHistory(conn *zk.Conn, id string) (*historyEntry, error) {
	raw, _, err := conn.Get(ls.historyPath(id))
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return nil, nil
	case err != nil:
		return nil, unavailable()
	}
	var h historyEntry
	_ = json.Unmarshal(raw, &h)
	return &h, nil
}

// Serving records the address this gateway is reached at (see Locate).
func (ls *Leases) Serving(advertise string) { ls.advertise.Store(&advertise) }

// recordedKeeper is the gateway that lease id's record names, "" when it
// has none that this gateway can read and prove.
func (ls *Leases) recordedKeeper(id string) string {
	if ValidName(id) != nil {
		return ""
	}
	raw, stat, err := ls.sess.Conn().Get(ls.recordPath(id))
	if err != nil {
		return ""
	}
	if gateway, proven := ls.recordGateway(id, stat, raw); proven {
		return gateway
	}
	return ""
}

// recordGateway is the gateway that the record of lease id (its node's stat
// and data) names, "" when it names none; proven says that the record checks
// out with the gateways' secret (see auth/nodeproof; logged when it does not).
func (ls *Leases) recordGateway(id string, stat *zk.Stat, raw []byte) (gateway string, proven bool) {
	rec, _ := decodeLeaseRecord(raw) // what is not read of it is not the gateway's (see decodeLeaseRecord)
	if rec.Gateway == "" || ValidName(rec.Gateway) != nil {
		return "", false
	}
	return rec.Gateway, ls.proofs.LeaseOK(ls.recordPath(id), id, stat, raw, rec.Gateway, rec.Proof)
}

// movedTo is where the lease id was handed over to from here, if it was.
func (ls *Leases) movedTo(id string) (Keeper, bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	k, ok := ls.moved[id]
	return k, ok
}
