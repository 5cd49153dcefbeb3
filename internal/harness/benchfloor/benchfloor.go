// Package benchfloor holds the floor servers of zkgate-bench's cpu phase
// (-cpu-floors): the least a gateway can do for the phase's lock workload
// with the gateway's own libraries, so that the gateway's CPU per
// acquire+release cycle can be read against what it cannot go below.
//
// A floor server answers exactly the requests the bench's lock workload
// sends, and nothing more:
//
//	POST   /v1/leases                  {"ttl":"10m0s","holder":"h"}  201 {"id":"..."}
//	POST   /v1/locks/{name}/acquire    {"lease":"id"}                200 {"token":N,"node":"..."}
//	POST   /v1/locks/{name}/release    {"lease":"id"}                204
//	DELETE /v1/leases/{id}                                           204
//	GET    /readyz                                                   200 (the bench's start waits for it)
//
// Leases live in memory (no expiry). Bad input is answered 4xx with an
// application/problem+json body. The kinds (Kinds):
//
//   - nethttp-zk: net/http (an http.Server and a ServeMux, one JSON decode
//     and one JSON encode per request) and the patched go-zookeeper of
//     internal/zk sending the gateway's ZooKeeper packets per cycle: an
//     acquire is CreateWithStatThenChildren of an ephemeral sequential node
//     under the lock's znode (one round trip), granted when the node is the
//     lowest (its czxid is the token); a release deletes it. No logs, no
//     metrics, no recipes layer.
//   - nethttp-nozk: the same HTTP path, answering from memory: the cost of
//     the HTTP part alone.
//   - net-zk: a minimal HTTP/1.1 server on the net package (keep-alive,
//     Content-Length bodies only) with the same ZooKeeper part: what
//     replacing net/http would buy at best.
//
// The program cmd/zkgate-bench/floorserver runs one as a process of its
// own, whose CPU the bench reads from /proc.
package benchfloor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path"
	"strings"
	"sync"

	"github.com/zkgate/zkgate/internal/zk"
)

// Kinds are the floor servers, in the order the bench runs them.
var Kinds = []string{"nethttp-zk", "nethttp-nozk", "net-zk"}

// UsesZooKeeper tells whether kind locks in ZooKeeper.
func UsesZooKeeper(kind string) bool { return kind != "nethttp-nozk" }

// Serve answers the bench's lock workload on ln as kind until ctx ends.
// conn is the ZooKeeper connection of the zk kinds (nil for nethttp-nozk),
// root the znode their locks are made under.
func Serve(ctx context.Context, ln net.Listener, kind string, conn *zk.Conn, root string) error {
	var locks lockStore
	switch {
	case kind == "nethttp-nozk":
		locks = &memoryLocks{tokens: map[string]int64{}, held: map[string]bool{}}
	case UsesZooKeeper(kind) && conn != nil:
		locks = &zkLocks{conn: conn, root: strings.TrimSuffix(root, "/")}
	default:
		return fmt.Errorf("floor %q: unknown kind, or no ZooKeeper connection (have %s)", kind, strings.Join(Kinds, ", "))
	}
	f := &floor{locks: locks, leases: map[string]bool{}, held: map[holdKey]string{}}
	if kind == "net-zk" {
		return serveNet(ctx, ln, f)
	}
	return serveNetHTTP(ctx, ln, f)
}

// floor is what both HTTP front ends answer from: the leases and the locks
// held, by lock and lease.
type floor struct {
	locks  lockStore
	mu     sync.Mutex
	leases map[string]bool
	held   map[holdKey]string // the node of each lock held
}

type holdKey struct{ name, lease string }

// lockStore makes and deletes the node of a lock held.
type lockStore interface {
	// acquire makes name's node for lease and returns it with its token,
	// or errHeld (having removed it) when another node is ahead.
	acquire(name, lease string) (node string, token int64, err error)
	release(node string) error
}

// failure is an answer other than success: its status and title.
type failure struct {
	status int
	title  string
}

func (e *failure) Error() string { return e.title }

var (
	errHeld     = &failure{http.StatusConflict, "the lock is held"}
	errNoLease  = &failure{http.StatusNotFound, "no such lease"}
	errNotHeld  = &failure{http.StatusConflict, "the lease does not hold the lock"}
	errBadBody  = &failure{http.StatusBadRequest, "the body is not the JSON expected"}
	errNotFound = &failure{http.StatusNotFound, "no such route"}
)

// statusOf is err's status and title: a failure's own, else 503.
func statusOf(err error) (int, string) {
	var f *failure
	if errors.As(err, &f) {
		return f.status, f.title
	}
	return http.StatusServiceUnavailable, err.Error()
}

// The bodies of the requests and answers.
type (
	leaseRequest struct {
		TTL    string `json:"ttl"`
		Holder string `json:"holder"`
	}
	leaseAnswer struct {
		ID string `json:"id"`
	}
	lockRequest struct {
		Lease string `json:"lease"`
	}
	grant struct {
		Token int64  `json:"token"`
		Node  string `json:"node"`
	}
	problem struct {
		Title  string `json:"title"`
		Status int    `json:"status"`
	}
)

func (f *floor) createLease() leaseAnswer {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	f.mu.Lock()
	f.leases[id] = true
	f.mu.Unlock()
	return leaseAnswer{ID: id}
}

func (f *floor) revokeLease(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.leases[id] {
		return errNoLease
	}
	delete(f.leases, id)
	return nil
}

func (f *floor) acquire(name, lease string) (grant, error) {
	k := holdKey{name, lease}
	f.mu.Lock()
	ok, node := f.leases[lease], f.held[k]
	f.mu.Unlock()
	switch {
	case !ok:
		return grant{}, errNoLease
	case node != "":
		return grant{}, errHeld // the bench never acquires twice; held again is not a floor's business
	}
	node, token, err := f.locks.acquire(name, lease)
	if err != nil {
		return grant{}, err
	}
	f.mu.Lock()
	f.held[k] = node
	f.mu.Unlock()
	return grant{Token: token, Node: node[strings.LastIndexByte(node, '/')+1:]}, nil
}

func (f *floor) release(name, lease string) error {
	k := holdKey{name, lease}
	f.mu.Lock()
	node, ok := f.held[k]
	delete(f.held, k)
	f.mu.Unlock()
	if !ok {
		return errNotHeld
	}
	return f.locks.release(node)
}

// zkLocks are locks in ZooKeeper: a lock is the znode root/locks/name, a
// holder an ephemeral sequential child of it.
type zkLocks struct {
	conn *zk.Conn
	root string
}

func (z *zkLocks) acquire(name, lease string) (string, int64, error) {
	parent := z.root + "/locks/" + name
	for {
		p, stat, list, err := z.conn.CreateWithStatThenChildren(parent+"/lock-", []byte(lease), zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll), parent)
		if errors.Is(err, zk.ErrNoNode) {
			if err := z.ensure(parent); err != nil {
				return "", 0, err
			}
			continue
		}
		if err == nil {
			err = list.Err
		}
		if err == nil && !lowest(p, list.Children) {
			err = errHeld
		}
		if err != nil && p != "" {
			_ = z.conn.Delete(p, -1)
		}
		if err != nil {
			return "", 0, err
		}
		return p, stat.Czxid, nil
	}
}

// lowest tells whether node p is the lowest of children (its siblings).
func lowest(p string, children []string) bool {
	me := p[strings.LastIndexByte(p, '/')+1:]
	for _, c := range children {
		if c < me { // same prefix, fixed-width sequence numbers
			return false
		}
	}
	return true
}

// ensure makes p as a container, which ZooKeeper removes once it is empty
// again (as the gateway's lock znodes are), and its missing ancestors:
// p first, as the gateway does, for a lock's znode is the one ZooKeeper
// removes between uses.
func (z *zkLocks) ensure(p string) error {
	_, err := z.conn.CreateContainer(p, nil, zk.FlagContainer, zk.WorldACL(zk.PermAll))
	if errors.Is(err, zk.ErrNoNode) {
		if err := z.ensure(path.Dir(p)); err != nil {
			return err
		}
		_, err = z.conn.CreateContainer(p, nil, zk.FlagContainer, zk.WorldACL(zk.PermAll))
	}
	if err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return err
	}
	return nil
}

func (z *zkLocks) release(node string) error { return z.conn.Delete(node, -1) }

// memoryLocks are locks in memory: a token counter per lock, and the locks
// held.
type memoryLocks struct {
	mu     sync.Mutex
	tokens map[string]int64
	held   map[string]bool
}

func (m *memoryLocks) acquire(name, _ string) (string, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held[name] {
		return "", 0, errHeld
	}
	m.held[name] = true
	m.tokens[name]++
	t := m.tokens[name]
	return fmt.Sprintf("%s/lock-%010d", name, t), t, nil
}

// release lets go of the lock of node, name/lock-N.
func (m *memoryLocks) release(node string) error {
	m.mu.Lock()
	delete(m.held, node[:strings.LastIndexByte(node, '/')])
	m.mu.Unlock()
	return nil
}
