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

// unreachableGateway is a gateway that did not give its part of an answer.
type unreachableGateway struct {
	Gateway   string `json:"gateway"`
	Advertise string `json:"advertise"`
	Error     string `json:"error"`
}

// peerQuery is the request askPeers sends to each gateway: its method,
// path and query (uri), its JSON body (nil: none), and the request id and
// caller's token name it is made for ("": none).
type peerQuery struct {
	method, uri       string
	body              []byte
	requestID, caller string
}

// askPeers sends q to every other registered gateway at once, each bounded
// by peerTimeout, with this gateway's proof, and gives take the body of
// each 200 answer (concurrently); it returns the gateways that did not
// answer, or whose answer take refused. Only registrations that check out
// are asked (see recipes.Service.Gateways).
func (a *API) askPeers(ctx context.Context, q peerQuery, take func(body []byte) error) []unreachableGateway {
	if a.Gateways == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, peerTimeout)
	defer cancel()
	gws, err := a.Gateways.Gateways(ctx)
	if err != nil {
		return []unreachableGateway{{Gateway: "*", Error: "the gateways could not be listed: " + string(recipes.ErrorCode(err))}}
	}
	var (
		mu          sync.Mutex
		wg          sync.WaitGroup
		unreachable []unreachableGateway
	)
	for _, g := range gws {
		if g.ID == a.Gateways.GatewayID() {
			continue
		}
		wg.Go(func() {
			if err := a.askPeer(ctx, recipes.Keeper{Gateway: g.ID, Advertise: g.Advertise}, q, take); err != nil {
				mu.Lock()
				unreachable = append(unreachable, unreachableGateway{Gateway: g.ID, Advertise: g.Advertise, Error: err.Error()})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.SortFunc(unreachable, func(x, y unreachableGateway) int { return cmp.Compare(x.Gateway, y.Gateway) })
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
	answer, err := a.Peers.ask(ctx, k, q.method, q.uri, contentType, q.requestID, q.caller, q.body)
	var e *recipes.Error
	switch {
	case errors.As(err, &e) && e.Err != nil:
		return fmt.Errorf("%s: %w", e.Detail, e.Err)
	case err != nil:
		return err
	case answer.status == http.StatusMisdirectedRequest:
		return nil
	case answer.status != http.StatusOK:
		return fmt.Errorf("answered %d %s", answer.status, http.StatusText(answer.status))
	}
	return take(answer.body)
}
