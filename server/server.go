// Package server assembles the gateway: configuration, routes, middleware,
// metrics, and the lifecycle of the ZooKeeper session and the HTTP server.
package server

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/zkgate/zkgate"
	"github.com/zkgate/zkgate/auth"
	"github.com/zkgate/zkgate/auth/peers"
	"github.com/zkgate/zkgate/handlers"
	"github.com/zkgate/zkgate/recipes"
	"github.com/zkgate/zkgate/zkserver"
	"go.opentelemetry.io/otel/trace"
)

// Version, Commit and Date describe the build; a release stamps them with
// -ldflags -X (see .goreleaser.yaml), a plain go build leaves the defaults.
var (
	Version = "dev"
	Commit  = ""
	Date    = ""
)

// BuildInfo is the one line that zkgate version prints: the version, then
// the commit and build date when the build was stamped with them.
func BuildInfo() string {
	s := "zkgate " + Version
	switch {
	case Commit != "" && Date != "":
		s += " (commit " + Commit + ", built " + Date + ")"
	case Commit != "":
		s += " (commit " + Commit + ")"
	}
	return s
}

// Deps are what the HTTP side needs.
type Deps struct {
	Service *recipes.Service
	API     *handlers.API
	Metrics *Metrics
	Log     *slog.Logger
	OpenAPI []byte
	// MaxItemBytes caps a queue item's body.
	MaxItemBytes int64
	// ZooKeeper is the connect list, whose servers the dashboard asks for
	// their mode; over TLS with ZooKeeperTLS when it is not nil.
	ZooKeeper    []string
	ZooKeeperTLS *tls.Config
	// Drain says whether the gateway is on its way out (nil: never).
	Drain *drain
	// BodyTimeout bounds the reading of a request's body (0: no bound).
	BodyTimeout time.Duration
	// AllowedHosts are --allowed-hosts: without tokens, the names besides
	// IP addresses and localhost that a request's Host may give.
	AllowedHosts []string
	// TrustedProxies are --trusted-proxies.
	TrustedProxies trustedProxies
	// Tracer makes the requests' spans (nil: tracing off).
	Tracer trace.Tracer

	// auth holds the client tokens (nil or empty: tokens off), limits the
	// caps on waiting requests (nil: none); Run sets both.
	auth   *auth.Store
	limits *limits
}

// New returns the gateway's HTTP handler.
func New(d Deps) http.Handler {
	if d.Drain == nil {
		d.Drain = &drain{}
	}
	if d.auth == nil {
		d.auth = &auth.Store{}
	}
	r := chi.NewRouter()
	fd := &frontDoor{log: d.Log, m: d.Metrics, drain: d.Drain, auth: d.auth, limits: d.limits, bodyTimeout: d.BodyTimeout,
		hosts: newHostCheck(d.AllowedHosts), proxies: d.TrustedProxies, tracer: d.Tracer}
	if d.API != nil {
		fd.peers = d.API.Peers
	}
	routes(r, fd, routeTable(d))
	return r
}

// NewLogger makes the gateway's logger.
func NewLogger(w io.Writer, format, level string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// Run serves until ctx ends, then shuts down gracefully: it stops
// accepting, ends the waits under way, closes the ZooKeeper session and stops
// the embedded ZooKeeper. It prints "zkgate listening on http://ADDR" to
// stdout once it serves.
func Run(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	log := NewLogger(stderr, cfg.LogFormat, cfg.LogLevel)
	for _, w := range cfg.Warnings {
		log.Warn(w)
	}
	gatewayID := newGatewayID()
	tracer, stopTracing, err := startTracing(cfg.tracing, gatewayID, log)
	if err != nil {
		return err
	}
	defer stopTracing() // last: the spans of the shutdown's requests are sent
	servers, zkFailed, stopZK, err := zooKeeper(ctx, &cfg, log)
	if err != nil {
		return err
	}
	defer stopZK()
	sessCfg := recipes.SessionConfig{Servers: servers, Timeout: cfg.SessionTimeout, Root: cfg.Root, Logger: log, Security: cfg.zkSecurity,
		Tracer: tracer}
	connectCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	sess, err := recipes.Connect(connectCtx, sessCfg)
	cancel()
	if err != nil {
		return err
	}
	defer sess.Close()

	metrics := NewMetrics(cfg.MetricsNames)
	journals := ""
	if cfg.Handover {
		// Each session's leases are recorded ahead, for the next start to
		// resume them after a kill, beside the sessions a SIGTERM saves.
		journals = savedDir(cfg.DataDir, cfg.ZK, cfg.Root)
	}
	svc := newService(sess, cfg, gatewayID, journals, metrics, log)
	defer svc.Close()
	ln, err := listen(ctx, cfg, svc, log)
	if err != nil {
		return err
	}
	lim := newLimits(cfg.Limits)
	lim.register(metrics.Registry)
	api := newAPI(cfg, svc, lim, gatewayID, log, stderr)
	defer checkDeadlocks(cfg, svc, api)()
	dr := &drain{}
	metrics.observeReadiness(sess, dr)
	api.Draining = dr.draining
	if cfg.Handover {
		api.Adopt = func(ctx context.Context, h *recipes.Handover) error { return svc.Adopt(ctx, sessCfg, h) }
		adoptSaved(ctx, log, svc, sessCfg, cfg.DataDir, savedDir(cfg.DataDir, cfg.ZK, cfg.Root))
	}
	tokens := auth.NewStore(cfg.tokens)
	if cfg.tokens != nil {
		log.Info("tokens on", "file", cfg.AuthFile, "tokens", cfg.tokens.Len())
		defer auth.ReloadOnHangup(ctx, cfg.AuthFile, tokens, log)()
	}
	handler := New(Deps{Service: svc, API: api, Metrics: metrics, Log: log, OpenAPI: zkgate.OpenAPI, MaxItemBytes: cfg.MaxItemBytes, ZooKeeper: servers, ZooKeeperTLS: cfg.zkSecurity.TLS,
		Drain: dr, BodyTimeout: cfg.BodyTimeout, AllowedHosts: cfg.AllowedHosts, TrustedProxies: cfg.TrustedProxies, Tracer: tracer, auth: tokens, limits: lim})

	// Every request context derives from base, so that shutdown can end the
	// long waits at once instead of waiting for them.
	base, stopRequests := context.WithCancelCause(context.Background())
	defer stopRequests(nil)
	fresh := &freshConns{}
	srv := newHTTPServer(handler, base, log, fresh)
	serveErr := make(chan error, 3)
	scheme := serve(srv, ln, cfg.gatewayTLS, serveErr)
	side, err := serveSides(cfg, metrics, log, serveErr)
	if err != nil {
		_ = srv.Close()
		return err
	}
	fmt.Fprintf(stdout, "zkgate listening on %s://%s (ZooKeeper %s, root %s)\n", scheme, ln.Addr(), joinServers(servers), cfg.Root)
	log.Info("serving", "addr", ln.Addr().String(), "scheme", scheme, "gateway", gatewayID, "zookeeper", joinServers(servers))

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case err := <-zkFailed:
		shutdown(log, stopRequests, srv, fresh, side...)
		return err
	}
	// From the drain on, each answer closes its connection (and the idle
	// ones close now): a client that a load balancer keeps on a connection
	// to this gateway (kube-proxy keeps a terminating pod's) reconnects for
	// its next request and is sent to a ready gateway, instead of retrying
	// this one's 503s until it exits.
	srv.SetKeepAlivesEnabled(false)
	if cfg.Handover {
		handOver(log, dr, svc, api.Peers, savedDir(cfg.DataDir, cfg.ZK, cfg.Root), cfg.DrainTimeout)
	} else {
		drainLeases(log, dr, svc, cfg.DrainTimeout)
	}
	shutdown(log, stopRequests, srv, fresh, side...)
	return nil
}

// zooKeeper returns the connect list: --zk's, or that of an embedded
// ZooKeeper it starts and supervises, which stop stops and whose failure
// to keep running zkFailed reports (nil: never). The embedded ZooKeeper
// admits this process alone: cfg's ZooKeeper TLS becomes its client
// certificate.
func zooKeeper(ctx context.Context, cfg *Config, log *slog.Logger) (servers []string, zkFailed <-chan error, stop func(), err error) {
	if len(cfg.ZK) > 0 {
		go warnExposedEnsemble(ctx, cfg.ZK, cfg.zkSecurity.TLS, log)
		return cfg.ZK, nil, func() {}, nil
	}
	zs, err := startEmbedded(ctx, *cfg, log)
	if err != nil {
		return nil, nil, nil, err
	}
	cfg.zkSecurity.TLS = zs.ClientTLS()
	if cfg.EmbeddedZKCredentials != "" {
		if err := zs.WriteClientCredentials(cfg.EmbeddedZKCredentials); err != nil {
			_ = zs.Stop()
			return nil, nil, nil, fmt.Errorf("--embedded-zk-credentials: %w", err)
		}
		log.Info("embedded ZooKeeper's client credentials written", "dir", cfg.EmbeddedZKCredentials)
	}
	supervise, stopSupervising := context.WithCancel(ctx)
	zkFailed = superviseEmbedded(supervise, zs, log)
	stop = func() {
		stopSupervising()
		if err := zs.Stop(); err != nil {
			log.Error("stop embedded ZooKeeper", "err", err)
		}
	}
	return []string{zs.Addr()}, zkFailed, stop, nil
}

// newService starts the recipes on the session, observed by metrics.
func newService(sess *recipes.Session, cfg Config, gatewayID, journals string, metrics *Metrics, log *slog.Logger) *recipes.Service {
	svc := recipes.New(sess, recipes.Config{
		GatewayID: gatewayID, Metrics: metrics, Logger: log, JournalDir: journals,
		Leases: recipes.LeaseConfig{MaxTTL: cfg.MaxTTL, RememberMax: cfg.MaxLeaseHistory, LockDelay: cfg.LockDelay, MaxLockDelay: cfg.MaxLockDelay,
			OlderPeerProofs: cfg.PeerProofs == "compat"},
		PeerSecret: cfg.peerSecret,
		Queues:     cfg.Queues,
	})
	metrics.observeService(svc)
	return svc
}

// listen opens the gateway's address and registers the gateway under it
// (--advertise, or the address itself) once it may join the others (see
// checkPeers).
func listen(ctx context.Context, cfg Config, svc *recipes.Service, log *slog.Logger) (net.Listener, error) {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	advertise := cfg.Advertise
	if advertise == "" {
		advertise = ln.Addr().String()
	}
	if err := checkPeers(ctx, cfg, svc, advertise, log); err != nil {
		ln.Close()
		return nil, err
	}
	svc.Register(recipes.GatewayInfo{Advertise: advertise, Version: Version, StartedAt: time.Now().UTC()})
	return ln, nil
}

// newAPI is the handlers' view of the service, its leases counted by lim,
// with the way to the other gateways.
func newAPI(cfg Config, svc *recipes.Service, lim *limits, gatewayID string, log *slog.Logger, stderr io.Writer) *handlers.API {
	api := handlers.New(svc)
	api.Leases = limitedLeases{Leases: svc.Leases, lim: lim}
	api.Limits = handlers.Limits{MaxWait: cfg.MaxWait}
	// The audit trail is written whatever --log-level says.
	api.Audit = NewLogger(stderr, cfg.LogFormat, "info").With("component", "audit")
	var peerTLS *peers.TLS
	if cfg.gatewayTLS != nil {
		cfg.gatewayTLS.SetLog(log)
		peerTLS = &peers.TLS{Transport: cfg.gatewayTLS.ForwardTransport(), VerifyClient: cfg.gatewayTLS.VerifyPeer()}
	}
	api.Peers = peers.New(gatewayID, cfg.peerSecret, peerTLS, log.With("component", "peers"))
	return api
}

// checkDeadlocks checks the long waits for deadlocks every
// --deadlock-check (0: never) until the returned stop.
func checkDeadlocks(cfg Config, svc *recipes.Service, api *handlers.API) (stop func()) {
	if cfg.DeadlockCheck <= 0 {
		return func() {}
	}
	checks, stopChecks := context.WithCancel(context.Background())
	checked := make(chan struct{})
	go func() {
		defer close(checked)
		svc.CheckDeadlocks(checks, cfg.DeadlockCheck, api.WaitPeers())
	}()
	return func() {
		stopChecks()
		<-checked
	}
}

// freshConns are a server's connections that have sent no request yet
// (http.StateNew).
type freshConns struct {
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// track is the server's ConnState hook.
func (f *freshConns) track(c net.Conn, st http.ConnState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st != http.StateNew {
		delete(f.conns, c)
		return
	}
	if f.conns == nil {
		f.conns = map[net.Conn]struct{}{}
	}
	f.conns[c] = struct{}{}
}

// closeAll closes the connections that have sent no request yet.
func (f *freshConns) closeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.conns {
		_ = c.Close()
		delete(f.conns, c)
	}
}

// newHTTPServer serves handler, every request's context derived from base.
// No ReadTimeout or WriteTimeout: they bound the whole request, and a wait
// may last --max-wait; the front door bounds the reading of the body
// instead (--body-timeout).
// fresh tracks the connections that have sent no request yet.
func newHTTPServer(handler http.Handler, base context.Context, log *slog.Logger, fresh *freshConns) *http.Server {
	return &http.Server{
		Handler:           handler,
		ConnState:         fresh.track,
		BaseContext:       func(net.Listener) context.Context { return base },
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		// HTTP/2 (h2c, and over TLS): at most 250 streams a connection (Go's
		// default, said here: every one counts against its token's limits
		// too), and a connection that sends nothing for 30 s is pinged and
		// closed if it does not answer within 15 s. IdleTimeout closes one
		// without streams.
		HTTP2: &http.HTTP2Config{MaxConcurrentStreams: 250, SendPingTimeout: 30 * time.Second, PingTimeout: 15 * time.Second},
	}
}

// serve serves srv on ln, over TLS when the gateway has a certificate,
// and returns the scheme; serving's end is sent on serveErr.
func serve(srv *http.Server, ln net.Listener, gatewayTLS *auth.GatewayTLS, serveErr chan<- error) (scheme string) {
	if gatewayTLS != nil {
		srv.TLSConfig = gatewayTLS.ServerConfig()
		go func() { serveErr <- srv.ServeTLS(ln, "", "") }()
		return "https"
	}
	// HTTP/2 over plain TCP (h2c, prior knowledge) besides HTTP/1.1:
	// thousands of waiting requests are streams of a few connections.
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv.Protocols = &protocols
	go func() { serveErr <- srv.Serve(ln) }()
	return "http"
}

// serveSides serves /metrics (--metrics-listen) and the profiles
// (--debug-listen) on addresses of their own, when asked; serving's end is
// sent on serveErr.
func serveSides(cfg Config, metrics *Metrics, log *slog.Logger, serveErr chan<- error) ([]*http.Server, error) {
	sides := []struct {
		addr, flag, what string
		handler          func() http.Handler
	}{
		{cfg.MetricsListen, "--metrics-listen", "/metrics", func() http.Handler { return metricsOnly(metrics) }},
		{cfg.DebugListen, "--debug-listen", "/debug/pprof/", debugHandler},
	}
	var servers []*http.Server
	for _, side := range sides {
		if side.addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", side.addr)
		if err != nil {
			return nil, fmt.Errorf("listen on %s (%s): %w", side.addr, side.flag, err)
		}
		// No token guards these: a page rebound to them by DNS could
		// read them, so they answer an address's or an allowed name's
		// requests alone, with or without tokens (see hostCheck).
		srv := &http.Server{Handler: hostChecked(newHostCheck(cfg.AllowedHosts), side.handler()), ReadHeaderTimeout: 10 * time.Second,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
		go func() { serveErr <- srv.Serve(ln) }()
		log.Info("serving "+side.what, "addr", ln.Addr().String())
		servers = append(servers, srv)
	}
	return servers, nil
}

// peerCredential says whether the gateway can prove itself to the other
// gateways of its root: a shared secret, or under TLS the peer CA.
func (cfg Config) peerCredential() bool {
	return cfg.peerSecret != nil || cfg.gatewayTLS != nil && cfg.gatewayTLS.ProvesPeers()
}

// checkPeers refuses to start a gateway with tokens and no peer credential
// beside other gateways (not counting one that was at its own address, a
// predecessor whose session has yet to expire): it could neither pass them
// a caller's requests nor take theirs, since a client's secret never goes
// from one gateway to another. Without tokens it starts, and says so.
func checkPeers(ctx context.Context, cfg Config, svc *recipes.Service, advertise string, log *slog.Logger) error {
	if cfg.peerCredential() {
		return nil
	}
	gws, err := svc.Gateways(ctx)
	if err != nil {
		return fmt.Errorf("list the gateways of %s: %w", cfg.Root, err)
	}
	var others []string
	for _, g := range gws {
		if g.Advertise != advertise {
			others = append(others, g.ID+" at "+g.Advertise)
		}
	}
	if len(others) == 0 {
		return nil
	}
	if cfg.tokens != nil {
		return usagef("other gateways serve the root %s (%s), and with --auth-file gateways must prove themselves to each other: "+
			"give every gateway the same --peer-secret-file (make one with: zkgate peer-secret new), or under TLS --tls-peer-ca",
			cfg.Root, strings.Join(others, ", "))
	}
	log.Warn("other gateways serve this root, and this gateway has no peer credential: requests for their leases answer 503, "+
		"and GET /v1/leases lists them as unreachable; give every gateway the same --peer-secret-file", "gateways", others)
	return nil
}

// drainLeases lets the holders of this gateway's leases finish for up to
// timeout, and at least until the latest expires_at it gave (a holder was
// told it holds until then): /readyz answers 503, nothing new starts, every
// answer says when the leases end; it returns early once no lease is left.
func drainLeases(log *slog.Logger, dr *drain, svc *recipes.Service, timeout time.Duration) {
	leases := svc.Leases
	if leases.Count() == 0 && timeout <= 0 {
		return
	}
	// Not before the latest expires_at a holder was told, whatever the
	// timeout: it holds until then.
	ends := time.Now().Add(max(timeout, 0))
	if p := leases.LatestPromise(); p.After(ends) {
		ends = p
	}
	dr.start(ends, true)
	svc.Draining(ends)
	log.Info("draining", "until", ends.UTC(), "leases", leases.Count())
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(ends) && leases.Count() > 0 {
		<-tick.C
	}
	log.Info("drained", "leases_left", leases.Count())
}

// shutdown stops serving: the waits under way end at once (503), then the
// connections close. The side servers (metrics, debug) may be nil.
func shutdown(log *slog.Logger, stopRequests context.CancelCauseFunc, srv *http.Server, fresh *freshConns, side ...*http.Server) {
	log.Info("shutting down")
	stopRequests(recipes.ErrShuttingDown)
	shutCtx, cancelShut := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancelShut()
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(shutCtx) }()
	// Shutdown counts a connection that has sent no request as idle only
	// once it is 5 s old (net/http's rule): a client's transport that dialed
	// one a moment ago (to send its next request on) would hold the exit
	// that long. It carries nothing: closed, as an idle one is.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var err error
	for done := false; !done; {
		fresh.closeAll()
		select {
		case err = <-shut:
			done = true
		case <-tick.C:
		}
	}
	if err != nil {
		log.Warn("HTTP shutdown", "err", err)
		_ = srv.Close()
	}
	for _, x := range side {
		if x != nil {
			_ = x.Shutdown(shutCtx)
		}
	}
}

// Supervising the embedded ZooKeeper: a child that dies is started again
// on its data dir and port, with back-off; after maxZKRestarts failed
// attempts in a row the gateway gives up (exits non-zero, for its own
// supervisor to act on).
const (
	maxZKRestarts     = 5
	zkRestartBackoff  = 250 * time.Millisecond
	zkRestartDeadline = time.Minute
)

// superviseEmbedded restarts zs whenever its process exits, until ctx
// ends. The returned channel gets an error once it gives up.
func superviseEmbedded(ctx context.Context, zs *zkserver.Server, log *slog.Logger) <-chan error {
	failed := make(chan error, 1)
	go func() {
		for {
			select {
			case <-zs.Exited():
			case <-ctx.Done():
				return
			}
			if ctx.Err() != nil {
				return // our own stop
			}
			log.Error("embedded ZooKeeper exited: restarting it", "addr", zs.Addr())
			if err := restartEmbedded(ctx, zs, log); err != nil {
				if ctx.Err() == nil {
					failed <- err
				}
				return
			}
		}
	}()
	return failed
}

func restartEmbedded(ctx context.Context, zs *zkserver.Server, log *slog.Logger) error {
	backoff := zkRestartBackoff
	var err error
	for attempt := 1; attempt <= maxZKRestarts; attempt++ {
		rctx, cancel := context.WithTimeout(ctx, zkRestartDeadline)
		err = zs.Restart(rctx)
		cancel()
		if err == nil {
			log.Warn("embedded ZooKeeper restarted", "attempt", attempt, "addr", zs.Addr())
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		log.Error("restart embedded ZooKeeper", "attempt", attempt, "of", maxZKRestarts, "err", err)
		if attempt < maxZKRestarts {
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return ctx.Err()
			}
			backoff *= 2
		}
	}
	return fmt.Errorf("the embedded ZooKeeper died and could not be restarted (%d attempts): %w", maxZKRestarts, err)
}

// startEmbedded runs a ZooKeeper child process on the data dir.
func startEmbedded(ctx context.Context, cfg Config, log *slog.Logger) (*zkserver.Server, error) {
	heap := embeddedHeap(cfg)
	opts := zkserver.Options{
		// TLS alone, to this process's certificate alone: no other local
		// user reads or ends what the gateway holds (docs/security.md).
		ClientAuth:        true,
		DataDir:           filepath.Join(cfg.DataDir, "zookeeper"),
		TickTime:          500 * time.Millisecond,
		MinSessionTimeout: time.Second,
		MaxSessionTimeout: 10 * time.Minute,
		// The heap that the caps let no sequence of requests exhaust
		// (heap.go), not DefaultJVMArgs' 256 MiB for tests.
		JVMArgs: []string{fmt.Sprintf("-Xmx%dm", heap>>20)},
	}
	if err := zkserver.Check(opts); err != nil {
		// A gateway without --zk may well have been meant for an ensemble
		// (a container image has no ZooKeeper to embed): say how.
		return nil, fmt.Errorf("%w\nor serve an external ensemble: --zk host:port,host:port (ZKGATE_ZK)", err)
	}
	if err := os.MkdirAll(opts.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	start := time.Now()
	zs, err := zkserver.Start(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("start embedded ZooKeeper: %w", err)
	}
	log.Info("embedded ZooKeeper started", "addr", zs.Addr(), "data", opts.DataDir, "heap_mib", heap>>20, "took", time.Since(start).Round(time.Millisecond))
	return zs, nil
}

func joinServers(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return out
}

func sessionHex(id int64) string { return fmt.Sprintf("0x%x", uint64(id)) }

func newGatewayID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	host, _ := os.Hostname()
	if host == "" {
		host = "gw"
	}
	return fmt.Sprintf("%s-%s", host, hex.EncodeToString(b[:]))
}

// metricsOnly serves GET /metrics and nothing else, with no token: for
// --metrics-listen, an address only the monitoring system reaches.
func metricsOnly(m *Metrics) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	return mux
}
