package recipes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/zkgate/zkgate/internal/zk"
)

// ValidName reports whether name may name a primitive: 1-200 characters of
// [A-Za-z0-9._-], not "." or "..". Nothing else ever reaches ZooKeeper.
func ValidName(name string) error {
	if name == "" || len(name) > 200 {
		return Errorf(CodeInvalid, "a name must be 1 to 200 characters long")
	}
	if name == "." || name == ".." {
		return Errorf(CodeInvalid, "a name may not be %q", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return Errorf(CodeInvalid, "a name may only hold A-Z, a-z, 0-9, '.', '_' and '-' (found %q at byte %d)", string(rune(c)), i)
		}
	}
	return nil
}

// nodeData is the data of every node zkgate creates for a lease, so that any
// gateway, and the dashboard, can say who holds it.
type nodeData struct {
	Lease   string `json:"lease"`
	Holder  string `json:"holder"`
	Gateway string `json:"gateway"`
	Limit   int    `json:"limit,omitempty"` // semaphores: the limit the holder uses
	Value   string `json:"value,omitempty"` // elections: the candidate's value
	Member  string `json:"member,omitempty"`
	Count   int    `json:"count,omitempty"`
}

func (d nodeData) bytes() []byte {
	b, _ := json.Marshal(d)
	return b
}

// parseNodeData reads a node's data; ok is false for nodes made by other
// clients (Curator writes the client's IP address, kazoo its identifier).
func parseNodeData(b []byte) (nodeData, bool) {
	var d nodeData
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &d) != nil || d.Lease == "" {
		return nodeData{}, false
	}
	return d, true
}

// ensureContainers creates p and its missing ancestors below the root as
// CONTAINER nodes: ZooKeeper removes them once they are empty again.
func (s *Session) ensureContainers(ctx context.Context, p string, epoch uint64) error {
	root := s.Root()
	if p == root || !strings.HasPrefix(p, root+"/") {
		return nil
	}
	for {
		if err := s.check(epoch); err != nil {
			return err
		}
		span := s.zkSpan(ctx, "create container", p)
		_, err := s.Conn().CreateContainer(p, nil, zk.FlagContainer, s.acl())
		endZK(span, err)
		switch {
		case err == nil, errors.Is(err, zk.ErrNodeExists):
			return nil
		case errors.Is(err, zk.ErrNoNode):
			if err := s.ensureContainers(ctx, path.Dir(p), epoch); err != nil {
				return err
			}
		case ambiguous(err):
			if werr := s.WaitLive(ctx); werr != nil {
				return unavailable()
			}
		default:
			return internal(err, "create "+p)
		}
	}
}

// createProtected creates the EPHEMERAL_SEQUENTIAL node
// parent/_c_<lease>-<marker><seq> for a lease of epoch and returns its path,
// and its stat when it came with the create (nil when the node was found
// again after an ambiguous error). The lease-derived prefix makes it safe to
// retry: after an ambiguous error the children are searched for the prefix
// before anything is created again.
//
// With list, the parent is listed right behind the create, in the same
// round trip, and that listing (made after the create: ZooKeeper runs a
// session's requests in order) is returned too when both succeeded; nil
// otherwise.
func (s *Session) createProtected(ctx context.Context, parent, leaseID, marker string, data []byte, epoch uint64, list bool) (string, *zk.Stat, *listing, error) {
	prefix := "_c_" + leaseID + "-" + marker
	recovering := false
	for {
		if err := s.check(epoch); err != nil {
			return "", nil, nil, err
		}
		conn := s.Conn()
		if recovering {
			children, _, err := conn.Children(parent)
			if err == nil {
				for _, c := range children {
					if strings.HasPrefix(c, prefix) {
						p, stat, err := s.ownedBy(parent+"/"+c, nil, epoch)
						return p, stat, nil, err
					}
				}
				recovering = false
			} else if !errors.Is(err, zk.ErrNoNode) {
				if ambiguous(err) {
					if werr := s.waitEpoch(ctx, epoch); werr != nil {
						return "", nil, nil, werr
					}
					continue
				}
				return "", nil, nil, internal(err, "list "+parent)
			}
		}
		// create2: the node's stat comes with it, where a create and then
		// an exists would be two round trips.
		var (
			p     string
			stat  *zk.Stat
			after *listing
			err   error
		)
		if list {
			var l zk.ChildrenResult
			span := s.zkSpan(ctx, "create2+children", parent)
			p, stat, l, err = conn.CreateWithStatThenChildren(parent+"/"+prefix, data, zk.FlagEphemeral|zk.FlagSequence, s.acl(), parent)
			endZK(span, err)
			if err == nil && l.Err == nil {
				after = &listing{children: l.Children, stat: l.Stat}
			}
		} else {
			span := s.zkSpan(ctx, "create2", parent)
			p, stat, err = conn.CreateWithStat(parent+"/"+prefix, data, zk.FlagEphemeral|zk.FlagSequence, s.acl())
			endZK(span, err)
		}
		switch {
		case err == nil:
			p, stat, err := s.ownedBy(p, stat, epoch)
			if err != nil {
				return "", nil, nil, err
			}
			return p, stat, after, nil
		case errors.Is(err, zk.ErrNoNode):
			if err := s.ensureContainers(ctx, parent, epoch); err != nil {
				return "", nil, nil, err
			}
		case ambiguous(err):
			recovering = true
			if werr := s.waitEpoch(ctx, epoch); werr != nil {
				return "", nil, nil, werr
			}
		default:
			return "", nil, nil, internal(err, fmt.Sprintf("create under %s", parent))
		}
	}
}

// ownedBy returns p, a node just made for a lease of epoch, and its stat, if
// that epoch is still the session's and (with a stat) the node its own.
// go-zookeeper sends a request that was queued when a session ended on its
// next connection, which may be a new session: then the node is that
// session's, and no lease knows of it. It is removed, and the lease is told
// that its session is gone.
func (s *Session) ownedBy(p string, stat *zk.Stat, epoch uint64) (string, *zk.Stat, error) {
	err := s.check(epoch)
	if err == nil && stat != nil {
		if _, cur, sid := s.Status(); cur == epoch && stat.EphemeralOwner != sid {
			err = errSessionLost // made on a session that epoch is not
		}
	}
	if err == nil || errors.Is(err, errUnavailable) {
		return p, stat, nil
	}
	if errors.Is(err, errSessionLost) {
		s.dropStray(p, "")
	}
	return "", nil, err
}

// dropStray deletes p if the current session owns it (and, with leaseID,
// if its data names that lease): a node made for a lease of an older session.
func (s *Session) dropStray(p, leaseID string) {
	conn := s.Conn()
	data, stat, err := conn.Get(p)
	if err != nil {
		return // gone with the old session, or out of reach: the session's end takes it
	}
	_, _, sid := s.Status()
	if stat.EphemeralOwner != sid {
		return
	}
	if leaseID != "" {
		if d, ok := parseNodeData(data); !ok || d.Lease != leaseID {
			return
		}
	}
	if err := conn.Delete(p, stat.Version); err != nil && !errors.Is(err, zk.ErrNoNode) {
		s.log.Warn("delete a node made for a lease of an older session", "node", p, "err", err)
	}
}

// errNoParent: the parent of a node to create is missing, and is not for
// createOwned to make.
var errNoParent = errors.New("parent node missing")

// ownedNode is how createOwned makes a node.
type ownedNode struct {
	data  []byte
	flags int32
	// lease, when set, is the lease the node's data names: a node found
	// there is ours only if it names it too.
	lease string
	// containers makes a missing parent as a CONTAINER; without it a
	// missing parent answers errNoParent.
	containers bool
	// fresh says that nothing made the node for lease before this call (a
	// take's claim: its claimant is new each time): a node that is there
	// already is someone else's, known without a read, unless this call's
	// own create went unanswered.
	fresh bool
}

// createOwned creates the plain (not sequential) node p for a lease of
// epoch, as n says. An ambiguous reply is resolved by reading p: it is ours
// when its owner is the session of epoch (for ephemeral nodes) and, with
// n.lease, its data names that lease. Someone else's node answers
// zk.ErrNodeExists.
func (s *Session) createOwned(ctx context.Context, p string, epoch uint64, n ownedNode) (string, error) {
	unanswered := false
	for {
		if err := s.check(epoch); err != nil {
			return "", err
		}
		conn := s.Conn()
		_, err := conn.Create(p, n.data, n.flags, s.acl())
		switch {
		case err == nil:
			if cerr := s.check(epoch); errors.Is(cerr, errSessionLost) {
				s.dropStray(p, n.lease)
				return "", cerr
			}
			return p, nil
		case errors.Is(err, zk.ErrNodeExists):
			if n.fresh && !unanswered {
				return "", zk.ErrNodeExists
			}
			raw, stat, gerr := conn.Get(p)
			if gerr != nil {
				if errors.Is(gerr, zk.ErrNoNode) {
					continue // gone meanwhile: try again
				}
				if !ambiguous(gerr) {
					return "", internal(gerr, "read "+p)
				}
				if werr := s.waitEpoch(ctx, epoch); werr != nil {
					return "", werr
				}
				continue
			}
			if err := s.check(epoch); err != nil && !errors.Is(err, errUnavailable) {
				return "", err
			}
			_, _, sid := s.Status()
			mine := n.flags&zk.FlagEphemeral != 0 && stat.EphemeralOwner == sid
			if mine && n.lease != "" {
				d, ok := parseNodeData(raw)
				mine = ok && d.Lease == n.lease
			}
			if mine {
				return p, nil // our own create, whose reply was lost
			}
			return "", zk.ErrNodeExists
		case errors.Is(err, zk.ErrNoNode):
			if !n.containers {
				return "", errNoParent
			}
			if err := s.ensureContainers(ctx, path.Dir(p), epoch); err != nil {
				return "", err
			}
		case ambiguous(err):
			unanswered = true
			if werr := s.waitEpoch(ctx, epoch); werr != nil {
				return "", werr
			}
		default:
			return "", internal(err, "create "+p)
		}
	}
}

// deleteNode deletes p, a node made for a lease of epoch, retrying across
// reconnects. The end of that epoch counts as success: the session's
// ephemeral nodes went with it, and a node of that path now is someone
// else's.
func (s *Session) deleteNode(ctx context.Context, p string, epoch uint64) error {
	for {
		if err := s.check(epoch); err != nil && !errors.Is(err, errUnavailable) {
			return nil
		}
		span := s.zkSpan(ctx, "delete", path.Dir(p))
		err := s.Conn().Delete(p, -1)
		endZK(span, err)
		if err == nil || errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if !ambiguous(err) {
			return err
		}
		if werr := s.waitEpoch(ctx, epoch); werr != nil {
			if errors.Is(werr, errSessionLost) || errors.Is(werr, errClosed) {
				return nil
			}
			return werr
		}
	}
}
