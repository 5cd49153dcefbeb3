// Command zkgate is the coordination gateway: ZooKeeper's recipes over HTTP,
// and its command-line client.
//
//	zkgate serve [flags]   (the default command)
//	zkgate lock NAME -- CMD [ARGS...]
//	zkgate elect NAME -- CMD [ARGS...]
//	zkgate status [--limit 50] [--json]
//	zkgate queue put|take|claim|ack|nack NAME ...
//	zkgate barrier raise|lower|wait NAME
//	zkgate lease grant|keepalive|revoke ...
//	zkgate token new ...
//	zkgate peer-secret new
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/zkgate/zkgate/server"
)

func main() {
	// Before anything else: the watchdog of lock and elect ignores the
	// signals that main's context would catch.
	if code, ok := watchdogMode(os.Args); ok {
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// run is the whole program, so tests can start it as it runs in production.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	rest := args[1:]
	cmd := "serve"
	if len(rest) > 0 && (len(rest[0]) > 0 && rest[0][0] != '-' || rest[0] == "--version") {
		cmd, rest = strings.TrimPrefix(rest[0], "--"), rest[1:]
	}
	switch cmd {
	case "serve":
		cfg, err := server.ParseConfig(rest, getenv, stderr)
		if err != nil {
			return err
		}
		return server.Run(ctx, cfg, stdout, stderr)
	case "lock":
		return lockCommand(ctx, rest, getenv, stdout, stderr)
	case "elect":
		return electCommand(ctx, rest, getenv, stdout, stderr)
	case "status":
		return statusCommand(ctx, rest, getenv, stdout, stderr)
	case "queue":
		return queueCommand(ctx, rest, getenv, stdout, stderr)
	case "barrier":
		return barrierCommand(ctx, rest, getenv, stdout, stderr)
	case "lease":
		return leaseCommand(ctx, rest, getenv, stdout, stderr)
	case "token":
		return tokenCmd(rest, getenv, stdout, stderr)
	case "peer-secret":
		return peerSecretCmd(rest, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, server.BuildInfo())
		return nil
	case "help":
		fmt.Fprint(stdout, helpText)
		return nil
	}
	return &server.UsageError{Msg: fmt.Sprintf("unknown command %q (try: zkgate help)", cmd)}
}
