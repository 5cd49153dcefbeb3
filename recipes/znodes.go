package recipes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/go-zookeeper/zk"
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
		_, err := s.Conn().CreateContainer(p, nil, zk.FlagContainer, s.acl())
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
// parent/_c_<lease>-<marker><seq> and returns its path. The lease-derived
// prefix makes it safe to retry: after an ambiguous error the children are
// searched for the prefix before anything is created again.
func (s *Session) createProtected(ctx context.Context, parent, leaseID, marker string, data []byte, epoch uint64) (string, error) {
	prefix := "_c_" + leaseID + "-" + marker
	recovering := false
	for {
		if err := s.check(epoch); err != nil {
			return "", err
		}
		conn := s.Conn()
		if recovering {
			children, _, err := conn.Children(parent)
			if err == nil {
				for _, c := range children {
					if strings.HasPrefix(c, prefix) {
						return parent + "/" + c, nil
					}
				}
				recovering = false
			} else if !errors.Is(err, zk.ErrNoNode) {
				if ambiguous(err) {
					if werr := s.WaitLive(ctx); werr != nil {
						return "", unavailable()
					}
					continue
				}
				return "", internal(err, "list "+parent)
			}
		}
		p, err := conn.Create(parent+"/"+prefix, data, zk.FlagEphemeral|zk.FlagSequence, s.acl())
		switch {
		case err == nil:
			return p, nil
		case errors.Is(err, zk.ErrNoNode):
			if err := s.ensureContainers(ctx, parent, epoch); err != nil {
				return "", err
			}
		case ambiguous(err):
			recovering = true
			if werr := s.WaitLive(ctx); werr != nil {
				return "", unavailable()
			}
		default:
			return "", internal(err, fmt.Sprintf("create under %s", parent))
		}
	}
}
