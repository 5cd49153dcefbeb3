package recipes

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// A seqNode is one sequential child of a lock, latch or semaphore parent,
// made by zkgate, Curator, kazoo or go-zookeeper alike.
type seqNode struct {
	Name   string
	Seq    int64
	Reader bool   // a read-lock node; every other kind excludes everything
	Mode   string // exclusive, read or write, from the marker
	Lease  string // the lease id (UUID) of a `_c_<uuid>-` protected name, if any
}

// marker is the text before a node's sequence number, and what it means.
type marker struct {
	text   string
	reader bool
	mode   string
}

var (
	// Curator's `__READ__`/`__WRIT__`, kazoo's `__rlock__`/`__lock__`, and
	// the `lock-` of Curator's InterProcessMutex, go-zookeeper and zkgate.
	lockMarkers = []marker{{"__READ__", true, ModeRead}, {"__WRIT__", false, ModeWrite},
		{"__rlock__", true, ModeRead}, {"__lock__", false, ModeExclusive}, {"lock-", false, ModeExclusive}}
	latchMarkers = []marker{{"latch-", false, ""}}
	leaseMarkers = []marker{{"lease-", false, ""}}
)

// parseContender reads name as text, a marker, then the sequence: ASCII
// digits to the end of the name. The marker is the one that ends right
// before the digits (a name may hold another marker's text earlier on, a
// UUID or a prefix of the client's), so the longest marker that fits wins.
// Names that match no marker, or whose sequence does not fit in an int64,
// are not contenders.
func parseContender(name string, markers []marker) (seqNode, bool) {
	end := len(name)
	start := end
	for start > 0 && name[start-1] >= '0' && name[start-1] <= '9' {
		start--
	}
	digits := name[start:end]
	if len(digits) == 0 || len(digits) > 19 {
		return seqNode{}, false
	}
	var best *marker
	for i := range markers {
		m := &markers[i]
		if strings.HasSuffix(name[:start], m.text) && (best == nil || len(m.text) > len(best.text)) {
			best = m
		}
	}
	if best == nil {
		return seqNode{}, false
	}
	seq, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return seqNode{}, false
	}
	return seqNode{Name: name, Seq: seq, Reader: best.reader, Mode: best.mode, Lease: protectedID(name)}, true
}

// protectedID returns the <uuid> of a Curator-style protected name
// `_c_<uuid>-...`, or "".
func protectedID(name string) string {
	const p = "_c_"
	if !strings.HasPrefix(name, p) || len(name) < len(p)+37 || name[len(p)+36] != '-' {
		return ""
	}
	return name[len(p) : len(p)+36]
}

// sortContenders parses names and sorts the contenders by sequence, compared
// as numbers (names differ in their prefixes, so sorting names is wrong).
func sortContenders(names []string, markers []marker) []seqNode {
	out := make([]seqNode, 0, len(names))
	for _, n := range names {
		if c, ok := parseContender(n, markers); ok {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Seq != out[j].Seq {
			return out[i].Seq < out[j].Seq
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// lockBlocks says whether an earlier seqNode c keeps self waiting: a
// writer waits for every earlier node; a reader for earlier writers that are
// not its own lease's (a lease that holds the write lock may also read, as
// with Curator).
func lockBlocks(c, self seqNode) bool {
	return !self.Reader || !c.Reader && (self.Lease == "" || c.Lease != self.Lease)
}

// anyBlocks: every earlier node keeps a candidate waiting (elections).
func anyBlocks(c, self seqNode) bool { return true }

// lockBlocker returns the name of the node that cs[i] must wait for, or ""
// when cs[i] holds the lock: the nearest earlier node that blocks it.
func lockBlocker(cs []seqNode, i int) string {
	for j := i - 1; j >= 0; j-- {
		if lockBlocks(cs[j], cs[i]) {
			return cs[j].Name
		}
	}
	return ""
}

// splitLock divides sorted contenders into holders and waiters.
func splitLock(cs []seqNode) (holders, waiters []seqNode) {
	for i := range cs {
		if lockBlocker(cs, i) == "" {
			holders = append(holders, cs[i])
		} else {
			waiters = append(waiters, cs[i])
		}
	}
	return holders, waiters
}

// Contender is one node in the line of a lock, semaphore or election, as
// any client sees it: holding, waiting, or leading. Holder is the label of
// its lease (or a foreign node's data).
type Contender struct {
	Node    string    `json:"node"`
	Seq     int64     `json:"seq"`
	Token   int64     `json:"token"`
	Mode    string    `json:"mode,omitempty"`
	Lease   string    `json:"lease,omitempty"`
	Holder  string    `json:"holder"`
	Session string    `json:"session,omitempty"` // see WithoutSessions
	Since   time.Time `json:"since"`
	Foreign bool      `json:"foreign"`
	Gateway string    `json:"gateway,omitempty"`
	Value   string    `json:"value,omitempty"`
	Limit   int       `json:"limit,omitempty"`
}

// withoutSessions is a copy of cs with no ZooKeeper session ids. A session
// id is all a client that may connect to ZooKeeper needs to take the
// session over (its password derives from it), so the gateway shows them to
// admins alone (docs/security.md).
func withoutSessions(cs []Contender) []Contender {
	out := slices.Clone(cs)
	for i := range out {
		out[i].Session = ""
	}
	return out
}

// WithoutSessions is err with no ZooKeeper session ids in the holders,
// waiters, candidates or leader its extra fields name (a wait that ended
// names who it waited behind); err itself where it names none.
func WithoutSessions(err error) error {
	var e *Error
	if !errors.As(err, &e) || len(e.Extra) == 0 {
		return err
	}
	var extra map[string]any
	for k, v := range e.Extra {
		var stripped any
		switch v := v.(type) {
		case []Contender:
			stripped = withoutSessions(v)
		case *Contender:
			stripped = withoutSession(v)
		default:
			continue
		}
		if extra == nil {
			extra = maps.Clone(e.Extra)
		}
		extra[k] = stripped
	}
	if extra == nil {
		return err
	}
	out := *e
	out.Extra = extra
	return &out
}

// withoutSession is a copy of *c with no session id (nil: nil).
func withoutSession(c *Contender) *Contender {
	if c == nil {
		return nil
	}
	out := *c
	out.Session = ""
	return &out
}

func holderOf(c seqNode, n Node) Contender {
	h := Contender{Node: c.Name, Seq: c.Seq, Token: n.Stat.Czxid, Mode: c.Mode,
		Session: sessionHex(n.Stat.EphemeralOwner), Since: time.UnixMilli(n.Stat.Ctime).UTC()}
	if d, ok := parseNodeData(n.Data); ok {
		h.Lease, h.Holder, h.Gateway, h.Value, h.Limit = d.Lease, d.Holder, d.Gateway, d.Value, d.Limit
	} else {
		h.Foreign = true
		h.Holder = printable(n.Data)
	}
	return h
}

// printable shows foreign node data as text, replacing what is not.
func printable(b []byte) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '.'
		}
		return r
	}, s)
}

// keptBy sets the gateway of each contender of lists (zkgate's, with a
// lease) to the gateway that keeps its lease now. A node's data names the
// gateway that made it, and a handover moves a lease, with its session and
// its nodes, to another gateway without rewriting them: a change of their
// data would fire, and so spend, the watches other clients keep on them
// (Curator's LeaderLatch heeds a deletion alone, and would wait for ever).
// The lease's record, which the taker makes anew, names its keeper; one
// gateway keeps every lease of a session, so one record is read for each
// session among them that is not this gateway's (its own, and those it
// adopted, need none). A record that cannot be read or proven leaves the
// node's word.
func (k *keepers) keptBy(lists ...[]Contender) {
	var refs []keptRef
	for _, list := range lists {
		for i := range list {
			if c := &list[i]; !c.Foreign {
				refs = append(refs, keptRef{session: c.Session, lease: c.Lease, gateway: &c.Gateway})
			}
		}
	}
	k.set(refs)
}

// keptRef is a node's session and lease, and the gateway to set to the
// lease's keeper (see keptBy).
type keptRef struct {
	session, lease string
	gateway        *string
}

// keepers tells who keeps a lease now (see keptBy): gatewayID keeps the
// sessions of sessions (this gateway's own and those it adopted), and
// recorded reads the keeper in a lease's record.
type keepers struct {
	gatewayID string
	sessions  func() []int64
	recorded  func(lease string) string
}

// set sets the gateway of each of refs to the keeper of its lease (see
// keptBy).
func (k *keepers) set(refs []keptRef) {
	keeper := map[string]string{}
	for _, id := range k.sessions() {
		if id != 0 {
			keeper[sessionHex(id)] = k.gatewayID
		}
	}
	for _, r := range refs {
		if r.lease == "" || r.session == "" {
			continue
		}
		gw, ok := keeper[r.session]
		if !ok {
			gw = k.recorded(r.lease)
			keeper[r.session] = gw
		}
		if gw != "" {
			*r.gateway = gw
		}
	}
}

// sessionHex is a session id as Contender.Session shows it.
func sessionHex(id int64) string { return fmt.Sprintf("0x%x", uint64(id)) }
