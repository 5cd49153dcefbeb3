// Command zkgate is the coordination gateway: ZooKeeper's recipes over HTTP.
//
//	zkgate serve [flags]   (the default command)
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/zkgate/zkgate/server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "zkgate:", err)
		var usage *server.UsageError
		if errors.As(err, &usage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// run is the whole program, so tests can start it as it runs in production.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	rest := args[1:]
	cmd := "serve"
	if len(rest) > 0 && len(rest[0]) > 0 && rest[0][0] != '-' {
		cmd, rest = rest[0], rest[1:]
	}
	switch cmd {
	case "serve":
		cfg, err := server.ParseConfig(rest, getenv, stderr)
		if err != nil {
			return err
		}
		return server.Run(ctx, cfg, stdout, stderr)
	case "token":
		return tokenCmd(rest, getenv, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "zkgate", server.Version)
		return nil
	case "help":
		fmt.Fprintln(stdout, "usage: zkgate [serve] [flags]   (zkgate serve -h lists the flags)")
		return nil
	}
	return &server.UsageError{Msg: fmt.Sprintf("unknown command %q (try: zkgate serve -h)", cmd)}
}
