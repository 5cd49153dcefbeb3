package recipes

import (
	"crypto/tls"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
)

// ZKSecurity is how the gateway identifies itself to ZooKeeper and what the
// nodes it creates allow others to do.
type ZKSecurity struct {
	// Digest is "user:password" for ZooKeeper's digest scheme; empty leaves
	// the session anonymous. It is added to every new connection before the
	// session counts as live, and go-zookeeper sends it again on each
	// reconnect of that connection.
	Digest string
	// CreatorACL gives every node the gateway creates all rights for the
	// session's authenticated identity and read for the world (ZooKeeper's
	// "auth" scheme), instead of all rights for the world. It needs Digest.
	CreatorACL bool
	// TLS, when not nil, dials each ZooKeeper server over TLS.
	TLS *tls.Config
}

// acl is the ACL of every node the gateway creates: the one place that
// decides it.
func (s *Session) acl() []zk.ACL {
	if s.cfg.Security.CreatorACL {
		return []zk.ACL{
			{Perms: zk.PermAll, Scheme: "auth", ID: ""},
			{Perms: zk.PermRead, Scheme: "world", ID: "anyone"},
		}
	}
	return zk.WorldACL(zk.PermAll)
}

// warnOpenParents logs, under CreatorACL, the nodes of paths (the root
// and the parents under it) that were there already with an ACL that lets
// anyone write to them: ZooKeeper keeps the ACL a node was created with, so
// a root made by a gateway with the open ACL stays open to anonymous
// clients (they may add and delete nodes under it), whatever this
// gateway's --zk-acl says.
func (s *Session) warnOpenParents(paths []string) {
	if !s.cfg.Security.CreatorACL {
		return
	}
	var open []string
	for _, p := range paths {
		acl, _, err := s.Conn().GetACL(p)
		if err == nil && slices.ContainsFunc(acl, func(a zk.ACL) bool {
			return a.Scheme == "world" && a.ID == "anyone" && a.Perms&^zk.PermRead != 0
		}) {
			open = append(open, p)
		}
	}
	if len(open) == 0 {
		return
	}
	s.log.Warn("--zk-acl creator does not cover nodes that were there already: these keep an ACL that lets anyone write to them",
		"root", s.cfg.Root, "open", strings.Join(open, ","),
		"fix", "as the gateway's ZooKeeper user, in zkCli.sh: addauth digest USER:PASSWORD, then setAcl -R "+s.cfg.Root+
			" auth::cdrwa,world:anyone:r (this resets the ACL of every node under it); or use a new --root")
}

// dialOption is go-zookeeper's dialer for the configured transport.
func (c ZKSecurity) dialOption() func(*zk.Conn) {
	if c.TLS == nil {
		return func(*zk.Conn) {}
	}
	cfg := c.TLS
	return zk.WithDialer(func(network, address string, timeout time.Duration) (net.Conn, error) {
		return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, network, address, cfg)
	})
}

// authedLocked reports whether the connection of generation gen has its
// credentials in: until then its session does not count as live, so that
// no create can reach ZooKeeper anonymously (an "auth" ACL would be refused).
func (s *Session) authedLocked(gen uint64) bool {
	return s.cfg.Security.Digest == "" || s.authGen == gen
}

// authenticate adds the credentials to conn, the connection of generation
// gen, retrying until it succeeds or the connection is replaced or closed;
// then it replays the session event that authedLocked held back.
// go-zookeeper remembers credentials that were accepted and re-sends them
// first thing on every reconnect of the same connection.
func (s *Session) authenticate(gen uint64, conn *zk.Conn) {
	for {
		err := conn.AddAuth("digest", []byte(s.cfg.Security.Digest))
		s.mu.Lock()
		current := s.gen == gen && s.state != StateClosed
		if err == nil && current {
			s.authGen = gen
		}
		s.mu.Unlock()
		if !current {
			return
		}
		if err == nil {
			if conn.State() == zk.StateHasSession {
				s.onEvent(gen, zk.Event{Type: zk.EventSession, State: zk.StateHasSession})
			}
			return
		}
		s.log.Warn("ZooKeeper authentication not accepted yet; retrying", "err", err)
		time.Sleep(time.Second)
	}
}
