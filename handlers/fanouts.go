package handlers

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/zkgate/zkgate/recipes"
)

// How the other gateways' answers to reads are shared (see askPeers).
const (
	// fanoutShare is how long an answer serves the identical reads that
	// follow it.
	fanoutShare = time.Second
	// fanoutKept bounds the answers kept before the old ones are swept.
	fanoutKept = 256
)

// fanouts shares the other gateways' answers to identical reads. (How often
// one client may make such reads at all is the front door's: see
// --fan-out-rate.) The zero value is ready.
type fanouts struct {
	mu      sync.Mutex
	answers map[string]*fanoutAnswer // by caller and uri
}

// fanoutAnswer is the other gateways' answers to one read, once done is
// closed: each 200's body, and those that did not answer.
type fanoutAnswer struct {
	done        chan struct{}
	at          time.Time
	bodies      []peerBody
	unreachable []recipes.UnreachableGateway
}

// peerBody is the body of one gateway's 200 answer.
type peerBody struct {
	from recipes.Keeper
	body []byte
}

// shared gives take the other gateways' answers to q: with q.share, those
// of an identical read under way or done within fanoutShare; or else those
// of ask, run now (bounded by peerTimeout, whoever waits for it).
func (f *fanouts) shared(ctx context.Context, q peerQuery, ask func(context.Context, func(recipes.Keeper, []byte) error) []recipes.UnreachableGateway,
	take func(body []byte) error) []recipes.UnreachableGateway {
	now := time.Now()
	key := q.caller + "\x00" + q.uri
	f.mu.Lock()
	if f.answers == nil {
		f.answers = map[string]*fanoutAnswer{}
	}
	a := f.answers[key]
	if a != nil && (!q.share || a.expired(now)) {
		a = nil
	}
	if a == nil {
		a = &fanoutAnswer{done: make(chan struct{})}
		if q.share {
			f.sweep(now)
			f.answers[key] = a
		}
		f.mu.Unlock()
		f.run(ctx, a, ask)
	} else {
		f.mu.Unlock()
	}
	select {
	case <-a.done:
	case <-ctx.Done():
		return []recipes.UnreachableGateway{{Gateway: "*", Error: "not answered: " + context.Cause(ctx).Error()}}
	}
	unreachable := append([]recipes.UnreachableGateway(nil), a.unreachable...)
	for _, b := range a.bodies {
		if err := take(b.body); err != nil {
			unreachable = append(unreachable, recipes.UnreachableGateway{Gateway: b.from.Gateway, Advertise: b.from.Advertise, Error: err.Error()})
		}
	}
	slices.SortFunc(unreachable, func(x, y recipes.UnreachableGateway) int { return cmp.Compare(x.Gateway, y.Gateway) })
	return unreachable
}

// run asks the other gateways for a, whoever waits for it: the caller that
// started it may go, and the others still get the answers.
func (f *fanouts) run(ctx context.Context, a *fanoutAnswer, ask func(context.Context, func(recipes.Keeper, []byte) error) []recipes.UnreachableGateway) {
	var mu sync.Mutex
	unreachable := ask(context.WithoutCancel(ctx), func(k recipes.Keeper, body []byte) error {
		mu.Lock()
		a.bodies = append(a.bodies, peerBody{k, body})
		mu.Unlock()
		return nil
	})
	f.mu.Lock()
	a.unreachable, a.at = unreachable, time.Now()
	f.mu.Unlock()
	close(a.done)
}

// expired says whether a, done, is older than fanoutShare at now. f.mu is
// held.
func (a *fanoutAnswer) expired(now time.Time) bool {
	select {
	case <-a.done:
		return now.Sub(a.at) >= fanoutShare
	default:
		return false // under way
	}
}

// sweep forgets the expired answers once there are many. f.mu is held.
func (f *fanouts) sweep(now time.Time) {
	if len(f.answers) < fanoutKept {
		return
	}
	for k, a := range f.answers {
		if a.expired(now) {
			delete(f.answers, k)
		}
	}
}
