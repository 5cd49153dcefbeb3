package handlers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/zkgate/zkgate/recipes"
)

// An answer about every gateway (the lease list, contention figures,
// deadlock checks) asks each of the others for its own part at once, each
// bounded by peerTimeout; a gateway that does not answer in time is named
// under "unreachable".

// peerTimeout bounds the asking of the other gateways.
const peerTimeout = 2 * time.Second

// unreachableFor is u as caller may see it (nil: tokens off, all of it):
// the gateways' ids, addresses and errors are the topology of the
// deployment, shown to a token that may read everything (*:*:read, as the
// dashboard needs); to any other, only how many gateways did not answer.
func unreachableFor(c *Caller, u []recipes.UnreachableGateway) []recipes.UnreachableGateway {
	if c == nil || len(u) == 0 || c.May("*", "*", LevelRead) {
		return u
	}
	var out []recipes.UnreachableGateway
	named := 0
	for _, g := range u {
		if g.Gateway == "*" { // names none already
			out = append(out, g)
		} else {
			named++
		}
	}
	if named > 0 {
		out = append(out, recipes.UnreachableGateway{Gateway: "*", Error: fmt.Sprintf(
			"%d of the other gateways did not answer (which, and why, is shown to tokens that may read everything: *:*:read)", named)})
	}
	return out
}

// peerQuery is the request askPeers sends to each gateway: its method,
// path and query (uri), its JSON body (nil: none), and the request id and
// caller's token name it is made for ("": none).
type peerQuery struct {
	method, uri       string
	body              []byte
	requestID, caller string
	// share lets the answers serve identical reads for fanoutShare: for
	// figures that are a window's sums anyway, not for what a client may
	// have just changed through another gateway (the lease list).
	share bool
}

// askPeers sends q to every other registered gateway at once, each bounded
// by peerTimeout, with this gateway's proof, and gives take the body of
// each 200 answer (concurrently); it returns the gateways that did not
// answer, or whose answer take refused. Only registrations that check out
// are asked (see recipes.Service.Gateways).
//
// The reads that ask (GET) are paced by the front door, per client, before
// anything is spent on them (--fan-out-rate), and a read of figures
// (q.share) is shared: the others' answers serve every identical read that
// comes within fanoutShare of them, or while they are asked. So no client,
// with whatever flood of reads, makes the other gateways answer more than
// its rate: their own traffic (forwarded requests, handovers) keeps its
// room.
func (a *API) askPeers(ctx context.Context, q peerQuery, take func(body []byte) error) []recipes.UnreachableGateway {
	if a.Gateways == nil {
		return nil
	}
	if q.method != http.MethodGet {
		return a.fanOut(ctx, q, func(_ recipes.Keeper, body []byte) error { return take(body) })
	}
	return a.fanouts.shared(ctx, q, func(ctx context.Context, keep func(recipes.Keeper, []byte) error) []recipes.UnreachableGateway {
		return a.fanOut(ctx, q, keep)
	}, take)
}

// fanOut asks every other registered gateway q at once (see askPeers),
// and gives take each 200 answer with the gateway that gave it.
func (a *API) fanOut(ctx context.Context, q peerQuery, take func(k recipes.Keeper, body []byte) error) []recipes.UnreachableGateway {
	ctx, cancel := context.WithTimeout(ctx, peerTimeout)
	defer cancel()
	gws, err := a.Gateways.Gateways(ctx)
	if err != nil {
		return []recipes.UnreachableGateway{{Gateway: "*", Error: "the gateways could not be listed: " + string(recipes.ErrorCode(err))}}
	}
	var (
		mu          sync.Mutex
		wg          sync.WaitGroup
		unreachable []recipes.UnreachableGateway
	)
	for _, g := range gws {
		if g.ID == a.Gateways.GatewayID() {
			continue
		}
		wg.Go(func() {
			k := recipes.Keeper{Gateway: g.ID, Advertise: g.Advertise}
			if err := a.askPeer(ctx, k, q, func(body []byte) error { return take(k, body) }); err != nil {
				mu.Lock()
				unreachable = append(unreachable, recipes.UnreachableGateway{Gateway: g.ID, Advertise: g.Advertise, Error: err.Error()})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.SortFunc(unreachable, func(x, y recipes.UnreachableGateway) int { return cmp.Compare(x.Gateway, y.Gateway) })
	return unreachable
}

// askPeer sends q to the gateway k and gives take the body of its 200
// answer. A gateway gone (another serves its address, and answers for
// itself) gives nothing and no error.
func (a *API) askPeer(ctx context.Context, k recipes.Keeper, q peerQuery, take func(body []byte) error) error {
	contentType := ""
	if q.body != nil {
		contentType = "application/json"
	}
	answer, err := a.Peers.Ask(ctx, k, q.method, q.uri, contentType, q.requestID, q.caller, q.body)
	var e *recipes.Error
	switch {
	case errors.As(err, &e) && e.Err != nil:
		return fmt.Errorf("%s: %w", e.Detail, e.Err)
	case err != nil:
		return err
	case answer.Status == http.StatusMisdirectedRequest:
		return nil
	case answer.Status != http.StatusOK:
		return fmt.Errorf("answered %d %s", answer.Status, http.StatusText(answer.Status))
	}
	return take(answer.Body)
}
