package zkserver

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// ErrNotServing is wrapped by Mode when the server answers but does not serve
// clients (an ensemble member without quorum, or one still syncing).
var ErrNotServing = errors.New("zkserver: ZooKeeper is not currently serving requests")

// defaultFLWTimeout bounds a four-letter word when ctx has no deadline: a
// healthy server answers in milliseconds, a hung one must not hang us.
const defaultFLWTimeout = 5 * time.Second

// FourLetterWord sends a ZooKeeper four-letter command (e.g. "ruok", "srvr",
// "mntr", "cons") to addr and returns the full reply. The server must
// whitelist the command (servers started here whitelist all of them).
func FourLetterWord(ctx context.Context, addr, cmd string) (string, error) {
	return FourLetterWordTLS(ctx, addr, cmd, nil)
}

// FourLetterWordTLS is FourLetterWord over TLS with cfg (nil: plain TCP):
// a TLS client port answers the words over TLS, to a client it admits.
func FourLetterWordTLS(ctx context.Context, addr, cmd string, cfg *tls.Config) (string, error) {
	if len(cmd) != 4 {
		return "", fmt.Errorf("zkserver: four-letter word %q is not four letters", cmd)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultFLWTimeout)
		defer cancel()
	}
	var conn net.Conn
	var err error
	if cfg != nil {
		conn, err = (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", addr)
	} else {
		conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return "", fmt.Errorf("zkserver: %s to %s: %w", cmd, addr, err)
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	// Cancellation (not only the deadline) must interrupt a blocked read.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	if _, err := io.WriteString(conn, cmd); err != nil {
		return "", fmt.Errorf("zkserver: %s to %s: %w", cmd, addr, err)
	}
	// The server closes the connection after its reply.
	b, err := io.ReadAll(conn)
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return string(b), fmt.Errorf("zkserver: %s to %s: %w", cmd, addr, err)
	}
	return string(b), nil
}

// modeOf asks addr for its mode with `srvr`.
func modeOf(ctx context.Context, addr string, cfg *tls.Config) (string, error) {
	out, err := FourLetterWordTLS(ctx, addr, "srvr", cfg)
	if err != nil {
		return "", err
	}
	return parseMode(out)
}

func parseMode(srvr string) (string, error) {
	sc := bufio.NewScanner(strings.NewReader(srvr))
	for sc.Scan() {
		if m, ok := strings.CutPrefix(sc.Text(), "Mode:"); ok {
			return strings.TrimSpace(m), nil
		}
	}
	if strings.Contains(srvr, "not currently serving") {
		return "", ErrNotServing
	}
	if strings.Contains(srvr, "is not executed because it is not in the whitelist") {
		return "", errors.New("zkserver: srvr is not whitelisted on this server (set 4lw.commands.whitelist)")
	}
	return "", fmt.Errorf("zkserver: no Mode in srvr reply %q", srvr)
}
