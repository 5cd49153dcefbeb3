package zkdial_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/zktest"
	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/internal/zkdial"
)

// Dial returns a connection only once it has a session, and gives up,
// closing it, when ctx ends first (here: a server that never answers).
func TestDial(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := zkdial.Dial(ctx, []string{zktest.Shared(t).Addr()}, 4*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if st := conn.State(); st != zk.StateHasSession {
		t.Fatalf("Dial returned a connection in state %v", st)
	}

	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	short, cancelShort := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancelShort()
	if c, err := zkdial.Dial(short, []string{silent.Addr().String()}, 4*time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dial to a silent server = %v, %v; want the context's end", c, err)
	}
}
