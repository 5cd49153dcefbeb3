// Package zkdial opens go-zookeeper connections for the programs and tests
// that talk to ZooKeeper beside the gateway (the bench's direct clients,
// tests' raw clients). It is apart from zkserver because internal/zk's own
// tests start ZooKeeper through zkserver.
package zkdial

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/zkgate/zkgate/internal/zk"
)

// sessionWait bounds Dial's wait for a session when ctx has none: a server
// that is up grants one in milliseconds.
const sessionWait = 30 * time.Second

// Dial opens a go-zookeeper connection to servers, with its logging off,
// and returns it once it has a session; it fails, closing the connection,
// if ctx ends or no session comes within 30s.
func Dial(ctx context.Context, servers []string, timeout time.Duration) (*zk.Conn, error) {
	return DialTLS(ctx, servers, timeout, nil)
}

// DialTLS is Dial over TLS with cfg (nil: plain TCP).
func DialTLS(ctx context.Context, servers []string, timeout time.Duration, cfg *tls.Config) (*zk.Conn, error) {
	dialer := zk.WithDialer(net.DialTimeout)
	if cfg != nil {
		dialer = zk.WithDialer(func(network, address string, timeout time.Duration) (net.Conn, error) {
			return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, network, address, cfg)
		})
	}
	live := make(chan struct{}, 1)
	conn, _, err := zk.Connect(servers, timeout, dialer, zk.WithLogInfo(false), zk.WithLogger(quietLogger{}),
		zk.WithEventCallback(func(ev zk.Event) {
			if ev.State == zk.StateHasSession {
				select {
				case live <- struct{}{}:
				default:
				}
			}
		}))
	if err != nil {
		return nil, fmt.Errorf("zk connect: %w", err)
	}
	t := time.NewTimer(sessionWait)
	defer t.Stop()
	select {
	case <-live:
		return conn, nil
	case <-ctx.Done():
		conn.Close()
		return nil, ctx.Err()
	case <-t.C:
		conn.Close()
		return nil, fmt.Errorf("no ZooKeeper session with %v within %s", servers, sessionWait)
	}
}

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}
