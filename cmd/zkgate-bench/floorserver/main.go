// Command floorserver runs one floor server of internal/harness/benchfloor as a
// process of its own, so that zkgate-bench's cpu phase (-cpu-floors) reads
// its CPU from /proc as it reads the gateway's:
//
//	floorserver -kind nethttp-zk|nethttp-nozk|net-zk -zk 127.0.0.1:2181 -root /zkgate-bench-floor
//
// It listens on 127.0.0.1 on a free port and announces the address on
// stdout in the gateway's words ("zkgate listening on http://..."), which
// the bench's start of a gateway reads; SIGTERM or SIGINT stops it.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/zkgate/zkgate/internal/harness/benchfloor"
	"github.com/zkgate/zkgate/internal/zk"
	"github.com/zkgate/zkgate/internal/zkdial"
)

func main() {
	kind := flag.String("kind", "nethttp-zk", "the floor server: "+strings.Join(benchfloor.Kinds, ", "))
	zkAddr := flag.String("zk", "127.0.0.1:2181", "ZooKeeper's address (the zk kinds)")
	root := flag.String("root", "/zkgate-bench-floor", "the znode the locks are made under")
	listen := flag.String("listen", "127.0.0.1:0", "the address to listen on")
	debug := flag.String("debug-listen", "", "serve net/http/pprof on this address too (zkgate-bench -cpu-profile), as the gateway's --debug-listen does")
	flag.Parse()
	if !slices.Contains(benchfloor.Kinds, *kind) {
		fmt.Fprintf(os.Stderr, "floorserver: -kind is one of %s\n", strings.Join(benchfloor.Kinds, ", "))
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *debug != "" {
		if err := serveDebug(*debug); err != nil {
			fmt.Fprintln(os.Stderr, "floorserver:", err)
			os.Exit(1)
		}
	}
	if err := run(ctx, *kind, *zkAddr, *root, *listen); err != nil {
		fmt.Fprintln(os.Stderr, "floorserver:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kind, zkAddr, root, listen string) error {
	var conn *zk.Conn
	if benchfloor.UsesZooKeeper(kind) {
		c, err := zkdial.Dial(ctx, []string{zkAddr}, 10*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		conn = c
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	fmt.Printf("zkgate listening on http://%s (floor %s)\n", ln.Addr(), kind)
	return benchfloor.Serve(ctx, ln, kind, conn, root)
}

// serveDebug serves net/http/pprof's profiles on addr, on a listener and a
// mux of its own, for the life of the process.
func serveDebug(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	go func() { _ = http.Serve(ln, mux) }()
	return nil
}
