package server

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/zkgate/zkgate/auth"
	"github.com/zkgate/zkgate/internal/peer"
	"github.com/zkgate/zkgate/recipes"
)

// Config is the gateway's configuration: flags, each with an environment twin.
type Config struct {
	Listen         string
	ZK             []string // empty: run an embedded ZooKeeper
	Root           string
	DataDir        string
	SessionTimeout time.Duration
	MaxWait        time.Duration
	MaxTTL         time.Duration
	BodyTimeout    time.Duration // reading a request's body, from the end of its headers
	DrainTimeout   time.Duration // 0: close the session at once on SIGTERM
	// Handover: on SIGTERM the gateway hands its leases to a peer (or to its
	// next start) instead of ending them.
	Handover     bool
	LockDelay    time.Duration // the lock-delay of a lease that asks for none
	MaxLockDelay time.Duration // the most a lease may ask for
	MaxItemBytes int64
	// MaxLeaseHistory caps the ended leases that answer 410 with their
	// reason: in each gateway's memory, and in the history in ZooKeeper.
	MaxLeaseHistory int
	// Queues caps what the queues hold in ZooKeeper.
	Queues recipes.QueueConfig
	// DeadlockCheck is how long a wait lasts before it is checked for a
	// deadlock, and how often after (0: never).
	DeadlockCheck time.Duration
	// MetricsNames is how many names have wait and hold histograms of
	// their own in /metrics.
	MetricsNames int
	LogFormat    string
	LogLevel     string
	Advertise    string

	// Security (see docs/security.md).
	AuthFile      string // --auth-file: the client tokens; empty: tokens off
	Insecure      bool   // serve a non-loopback address without tokens
	MetricsListen string // --metrics-listen: /metrics, open, on an address of its own
	DebugListen   string // --debug-listen: net/http/pprof, on an address of its own
	TLSCert       string
	TLSKey        string
	TLSClientCA   string
	TLSPeerCA     string
	ZKAuth        string // digest:USER:PASSWORD (from --zk-auth or --zk-auth-file)
	ZKACL         string // open or creator
	ZKTLSCA       string
	ZKTLSCert     string
	ZKTLSKey      string
	Limits        Limits

	// Warnings are logged at start: what the command line does that works
	// but should not be done.
	Warnings []string
	// PeerSecretFile is --peer-secret-file: the secret the gateways of one
	// root share to prove themselves to each other.
	PeerSecretFile string

	// What the security flags load, checked at start so that a bad file is
	// a usage error (exit 2) rather than a failure later.
	tokens     *auth.Tokens
	gatewayTLS *auth.GatewayTLS
	zkSecurity recipes.ZKSecurity
	peerSecret *peer.Secret
}

// UsageError is a bad command line: the caller prints it and exits 2.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func usagef(format string, args ...any) error { return &UsageError{Msg: fmt.Sprintf(format, args...)} }

// ParseConfig reads flags from args (without the program and command name),
// falling back to ZKGATE_* variables and then to the defaults.
func ParseConfig(args []string, getenv func(string) string, stderr io.Writer) (Config, error) {
	return parseConfig(args, getenv, stderr, nil)
}

// ConfigFlags are ParseConfig's flags with their built-in defaults (no
// ZKGATE_* variable read, so no secret from the environment): for help,
// completion and man pages.
func ConfigFlags() []*flag.Flag {
	var flags []*flag.Flag
	_, _ = parseConfig(nil, func(string) string { return "" }, io.Discard, func(fs *flag.FlagSet) {
		fs.VisitAll(func(f *flag.Flag) { flags = append(flags, f) })
	})
	return flags
}

// parseConfig is ParseConfig; with visit, it hands visit the flag set once
// every flag is defined, and parses nothing.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer, visit func(*flag.FlagSet)) (Config, error) {
	fs := flag.NewFlagSet("zkgate serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	listen := fs.String("listen", env("ZKGATE_LISTEN", "127.0.0.1:8080"), "HTTP listen address (ZKGATE_LISTEN)")
	zkFlag := fs.String("zk", env("ZKGATE_ZK", ""), "ZooKeeper ensemble host:port,host:port; empty runs an embedded ZooKeeper (ZKGATE_ZK)")
	root := fs.String("root", env("ZKGATE_ROOT", "/zkgate"), "root znode (ZKGATE_ROOT)")
	dataDir := fs.String("data-dir", env("ZKGATE_DATA_DIR", "./zkgate-data"), "data of the embedded ZooKeeper (ZKGATE_DATA_DIR)")
	sessTimeout := fs.String("session-timeout", env("ZKGATE_SESSION_TIMEOUT", "10s"), "ZooKeeper session timeout (ZKGATE_SESSION_TIMEOUT)")
	maxWait := fs.String("max-wait", env("ZKGATE_MAX_WAIT", "5m"), "cap on ?wait= (ZKGATE_MAX_WAIT)")
	maxTTL := fs.String("max-ttl", env("ZKGATE_MAX_TTL", "1h"), "cap on lease TTLs (ZKGATE_MAX_TTL)")
	handoverEnv, handoverErr := strconv.ParseBool(env("ZKGATE_HANDOVER", "true"))
	handover := fs.Bool("handover", handoverEnv, "on SIGTERM, hand the leases over to another gateway (or, without one, to the next start, through --data-dir) instead of ending them (ZKGATE_HANDOVER)")
	drainTimeout := fs.String("drain-timeout", env("ZKGATE_DRAIN_TIMEOUT", "5s"), "on SIGTERM, how long the gateway serves on: passing requests for the leases it handed over to their keeper, or, without a handover, letting holders finish (and never less than the latest expires_at it gave) (ZKGATE_DRAIN_TIMEOUT)")
	lockDelay := fs.String("lock-delay", env("ZKGATE_LOCK_DELAY", "0s"), "after a lease ends without releasing (expired, its gateway gone, revoked by an admin), no grant of what it held for this long, unless the lease asks for its own lock_delay (ZKGATE_LOCK_DELAY)")
	maxLockDelay := fs.String("max-lock-delay", env("ZKGATE_MAX_LOCK_DELAY", "1m"), "cap on a lease's lock_delay (ZKGATE_MAX_LOCK_DELAY)")
	maxItem := fs.String("max-item-bytes", env("ZKGATE_MAX_ITEM_BYTES", "512KiB"), "cap on queue item size (ZKGATE_MAX_ITEM_BYTES)")
	logFormat := fs.String("log-format", env("ZKGATE_LOG_FORMAT", "text"), "text or json (ZKGATE_LOG_FORMAT)")
	logLevel := fs.String("log-level", env("ZKGATE_LOG_LEVEL", "info"), "debug, info, warn or error (ZKGATE_LOG_LEVEL)")
	advertise := fs.String("advertise", env("ZKGATE_ADVERTISE", ""), "host:port other gateways use to reach this one; default the listen address (ZKGATE_ADVERTISE)")
	authFile := fs.String("auth-file", env("ZKGATE_AUTH_FILE", ""), "client tokens file (see zkgate token new); turns authentication on (ZKGATE_AUTH_FILE)")
	insecureEnv, insecureErr := strconv.ParseBool(env("ZKGATE_INSECURE", "false"))
	insecure := fs.Bool("insecure", insecureEnv, "allow a non-loopback --listen without --auth-file: anyone who reaches it owns every lock (ZKGATE_INSECURE)")
	metricsListen := fs.String("metrics-listen", env("ZKGATE_METRICS_LISTEN", ""), "also serve /metrics, with no token, on this host:port (ZKGATE_METRICS_LISTEN)")
	debugListen := fs.String("debug-listen", env("ZKGATE_DEBUG_LISTEN", ""), "serve net/http/pprof (CPU, heap, goroutine, block and mutex profiles) on this host:port; off when empty (ZKGATE_DEBUG_LISTEN)")
	tlsCert := fs.String("tls-cert", env("ZKGATE_TLS_CERT", ""), "serve HTTPS with this PEM certificate (chain), reloaded when it changes (ZKGATE_TLS_CERT)")
	tlsKey := fs.String("tls-key", env("ZKGATE_TLS_KEY", ""), "the PEM private key of --tls-cert (ZKGATE_TLS_KEY)")
	tlsClientCA := fs.String("tls-client-ca", env("ZKGATE_TLS_CLIENT_CA", ""), "require client certificates signed by these PEM CAs (ZKGATE_TLS_CLIENT_CA)")
	tlsPeerCA := fs.String("tls-peer-ca", env("ZKGATE_TLS_PEER_CA", ""), "PEM CAs of the other gateways' certificates: the only CAs trusted for forwarding, both ways (ZKGATE_TLS_PEER_CA)")
	peerSecretFile := fs.String("peer-secret-file", env("ZKGATE_PEER_SECRET_FILE", ""), "a secret the gateways of one root share (zkgate peer-secret new), so that they forward requests only to each other (ZKGATE_PEER_SECRET_FILE)")
	zkAuth := fs.String("zk-auth", env("ZKGATE_ZK_AUTH", ""), "authenticate to ZooKeeper as digest:USER:PASSWORD (ZKGATE_ZK_AUTH)")
	zkAuthFile := fs.String("zk-auth-file", env("ZKGATE_ZK_AUTH_FILE", ""), "read --zk-auth from this file (ZKGATE_ZK_AUTH_FILE)")
	zkACL := fs.String("zk-acl", env("ZKGATE_ZK_ACL", "open"), "ACL of the nodes the gateway creates: open (world-writable) or creator (all for --zk-auth's identity, read for the world) (ZKGATE_ZK_ACL)")
	zkTLSCA := fs.String("zk-tls-ca", env("ZKGATE_ZK_TLS_CA", ""), "connect to ZooKeeper over TLS, trusting these PEM CAs (ZKGATE_ZK_TLS_CA)")
	zkTLSCert := fs.String("zk-tls-cert", env("ZKGATE_ZK_TLS_CERT", ""), "client certificate (PEM) for ZooKeeper's TLS port (ZKGATE_ZK_TLS_CERT)")
	zkTLSKey := fs.String("zk-tls-key", env("ZKGATE_ZK_TLS_KEY", ""), "the PEM private key of --zk-tls-cert (ZKGATE_ZK_TLS_KEY)")
	maxLeases := fs.String("max-leases", env("ZKGATE_MAX_LEASES", "20000"), "cap on live leases of this gateway (ZKGATE_MAX_LEASES)")
	maxLeasesPerToken := fs.String("max-leases-per-token", env("ZKGATE_MAX_LEASES_PER_TOKEN", "2000"), "cap on live leases of one token (tokens off: of one client address) (ZKGATE_MAX_LEASES_PER_TOKEN)")
	leaseRate := fs.String("lease-rate", env("ZKGATE_LEASE_RATE", "100"), "cap on new leases per second of one token (tokens off: of one client address) (ZKGATE_LEASE_RATE)")
	maxWaiters := fs.String("max-waiters", env("ZKGATE_MAX_WAITERS", "20000"), "cap on requests waiting at once (?wait= above 0) (ZKGATE_MAX_WAITERS)")
	maxWaitersPerToken := fs.String("max-waiters-per-token", env("ZKGATE_MAX_WAITERS_PER_TOKEN", ""), "cap on requests waiting at once of one token (tokens off: of one client address); default half of --max-waiters (ZKGATE_MAX_WAITERS_PER_TOKEN)")
	maxQueueItems := fs.String("max-queue-items", env("ZKGATE_MAX_QUEUE_ITEMS", strconv.Itoa(recipes.DefaultMaxQueueItems)), "cap on the items of one queue (ZKGATE_MAX_QUEUE_ITEMS)")
	maxQueueBytes := fs.String("max-queue-bytes", env("ZKGATE_MAX_QUEUE_BYTES", "16MiB"), "cap on the bytes of one queue's items (ZKGATE_MAX_QUEUE_BYTES)")
	maxQueuesItems := fs.String("max-queues-items", env("ZKGATE_MAX_QUEUES_ITEMS", strconv.Itoa(recipes.DefaultMaxQueuesItems)), "cap on the items of all queues together, each queue counting 3 more (ZKGATE_MAX_QUEUES_ITEMS)")
	maxQueuesBytes := fs.String("max-queues-bytes", env("ZKGATE_MAX_QUEUES_BYTES", "64MiB"), "cap on the bytes of all queues' items together (ZKGATE_MAX_QUEUES_BYTES)")
	maxLeaseHistory := fs.String("max-lease-history", env("ZKGATE_MAX_LEASE_HISTORY", "100000"), "cap on the ended leases remembered (410 with the reason), oldest dropped first; they are kept an hour at most (ZKGATE_MAX_LEASE_HISTORY)")
	maxWaitersPerName := fs.String("max-waiters-per-name", env("ZKGATE_MAX_WAITERS_PER_NAME", "10000"), "cap on requests waiting at once on one lock, semaphore, election, barrier or queue (ZKGATE_MAX_WAITERS_PER_NAME)")
	maxRequestsPerToken := fs.String("max-requests-per-token", env("ZKGATE_MAX_REQUESTS_PER_TOKEN", "1000"), "cap on requests under way at once of one token (tokens off: of one client address) that do not wait (ZKGATE_MAX_REQUESTS_PER_TOKEN)")
	bodyTimeout := fs.String("body-timeout", env("ZKGATE_BODY_TIMEOUT", "10s"), "time a client has to send a request's body, from the end of its headers (ZKGATE_BODY_TIMEOUT)")
	deadlockCheck := fs.String("deadlock-check", env("ZKGATE_DEADLOCK_CHECK", "1s"), "a wait for a lock or a semaphore that lasts this long is checked for a deadlock, and again as often while it lasts; in one, the newest wait of the cycle answers 409 deadlock; 0 turns it off (ZKGATE_DEADLOCK_CHECK)")
	metricsNames := fs.String("metrics-names", env("ZKGATE_METRICS_NAMES", "20"), "how many locks and semaphores, the busiest, have wait and hold histograms of their own in /metrics; the others add up under name=\"*\" (ZKGATE_METRICS_NAMES)")
	if visit != nil {
		visit(fs)
		return Config{}, nil
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fs.PrintDefaults()
			return Config{}, &UsageError{Msg: "usage: zkgate serve [flags]"}
		}
		return Config{}, usagef("%v", err)
	}
	if fs.NArg() > 0 {
		return Config{}, usagef("unexpected argument %q", fs.Arg(0))
	}
	cfg := Config{Listen: *listen, Root: *root, DataDir: *dataDir, LogFormat: *logFormat, LogLevel: *logLevel, Advertise: *advertise,
		AuthFile: *authFile, MetricsListen: *metricsListen, DebugListen: *debugListen, TLSCert: *tlsCert, TLSKey: *tlsKey, TLSClientCA: *tlsClientCA,
		TLSPeerCA: *tlsPeerCA, PeerSecretFile: *peerSecretFile, ZKAuth: *zkAuth, ZKACL: *zkACL, ZKTLSCA: *zkTLSCA, ZKTLSCert: *zkTLSCert, ZKTLSKey: *zkTLSKey}
	var err error
	if insecureErr != nil {
		return Config{}, usagef("ZKGATE_INSECURE %q must be true or false", getenv("ZKGATE_INSECURE"))
	}
	cfg.Insecure = *insecure
	if handoverErr != nil {
		return Config{}, usagef("ZKGATE_HANDOVER %q must be true or false", getenv("ZKGATE_HANDOVER"))
	}
	cfg.Handover = *handover
	if cfg.ZK, err = parseEnsemble(*zkFlag); err != nil {
		return Config{}, err
	}
	if _, _, err := net.SplitHostPort(cfg.Listen); err != nil {
		return Config{}, usagef("--listen %q is not host:port", cfg.Listen)
	}
	if err := validRoot(cfg.Root); err != nil {
		return Config{}, err
	}
	durations := []struct {
		name     string
		raw      string
		dst      *time.Duration
		min, max time.Duration
	}{
		{"--session-timeout", *sessTimeout, &cfg.SessionTimeout, time.Second, 10 * time.Minute},
		{"--max-wait", *maxWait, &cfg.MaxWait, time.Second, 24 * time.Hour},
		{"--max-ttl", *maxTTL, &cfg.MaxTTL, time.Second, 7 * 24 * time.Hour},
		{"--drain-timeout", *drainTimeout, &cfg.DrainTimeout, 0, time.Hour},
		{"--max-lock-delay", *maxLockDelay, &cfg.MaxLockDelay, 0, 10 * time.Minute},
		{"--lock-delay", *lockDelay, &cfg.LockDelay, 0, 10 * time.Minute},
		{"--body-timeout", *bodyTimeout, &cfg.BodyTimeout, time.Second, time.Hour},
		{"--deadlock-check", *deadlockCheck, &cfg.DeadlockCheck, 0, time.Minute},
	}
	for _, d := range durations {
		v, err := time.ParseDuration(d.raw)
		if err != nil || v < d.min || v > d.max {
			return Config{}, usagef("%s %q must be a duration from %s to %s", d.name, d.raw, d.min, d.max)
		}
		*d.dst = v
	}
	if cfg.DeadlockCheck != 0 && cfg.DeadlockCheck < minDeadlockCheck {
		return Config{}, usagef("--deadlock-check %q must be 0 (off) or from %s to 1m", *deadlockCheck, minDeadlockCheck)
	}
	if cfg.MetricsNames, err = strconv.Atoi(*metricsNames); err != nil || cfg.MetricsNames < 0 || cfg.MetricsNames > recipes.ContentionNames {
		return Config{}, usagef("--metrics-names %q must be a whole number from 0 to %d", *metricsNames, recipes.ContentionNames)
	}
	if cfg.LockDelay > cfg.MaxLockDelay {
		return Config{}, usagef("--lock-delay %s is above --max-lock-delay %s", cfg.LockDelay, cfg.MaxLockDelay)
	}
	if cfg.MaxItemBytes, err = parseBytes(*maxItem); err != nil {
		return Config{}, usagef("--max-item-bytes: %v", err)
	}
	if cfg.LogFormat != "text" && cfg.LogFormat != "json" {
		return Config{}, usagef("--log-format must be text or json")
	}
	switch cfg.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return Config{}, usagef("--log-level must be debug, info, warn or error")
	}
	if cfg.Limits, err = parseLimits(*maxLeases, *maxLeasesPerToken, *leaseRate, *maxWaiters, *maxWaitersPerToken, *maxWaitersPerName, *maxRequestsPerToken); err != nil {
		return Config{}, err
	}
	if cfg.MaxLeaseHistory, err = strconv.Atoi(*maxLeaseHistory); err != nil || cfg.MaxLeaseHistory < 1 || cfg.MaxLeaseHistory > 10_000_000 {
		return Config{}, usagef("--max-lease-history %q must be a whole number from 1 to 10000000", *maxLeaseHistory)
	}
	if cfg.Queues, err = parseQueueCaps(*maxQueueItems, *maxQueueBytes, *maxQueuesItems, *maxQueuesBytes); err != nil {
		return Config{}, err
	}
	if err := cfg.parseSecurity(*zkAuthFile); err != nil {
		return Config{}, err
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "zk-auth" {
			cfg.Warnings = append(cfg.Warnings, "--zk-auth on the command line shows the ZooKeeper password to anyone who can list "+
				"processes (ps, /proc/PID/cmdline): give it in a file with --zk-auth-file, or in ZKGATE_ZK_AUTH")
		}
	})
	if len(cfg.ZK) == 0 {
		if err := usableDir(cfg.DataDir); err != nil {
			return Config{}, err
		}
	}
	return cfg, nil
}

// minDeadlockCheck is the shortest --deadlock-check: a check may read
// ZooKeeper and ask the other gateways.
const minDeadlockCheck = 100 * time.Millisecond

// parseEnsemble reads "host:port,host:port".
func parseEnsemble(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var out []string
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		host, port, err := net.SplitHostPort(part)
		if err != nil || host == "" {
			return nil, usagef("--zk: %q is not host:port (expected e.g. zk1:2181,zk2:2181,zk3:2181)", part)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, usagef("--zk: %q has no valid port", part)
		}
		out = append(out, part)
	}
	return out, nil
}

// validRoot accepts an absolute znode path of plain segments.
func validRoot(root string) error {
	if !strings.HasPrefix(root, "/") || root == "/" || strings.HasSuffix(root, "/") {
		return usagef("--root %q must be an absolute znode path such as /zkgate", root)
	}
	for _, seg := range strings.Split(root[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return usagef("--root %q has an empty, '.' or '..' segment", root)
		}
		for _, c := range seg {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
				return usagef("--root %q may only hold A-Z, a-z, 0-9, '.', '_', '-' and '/'", root)
			}
		}
	}
	if root == "/zookeeper" || strings.HasPrefix(root, "/zookeeper/") {
		return usagef("--root may not be under /zookeeper, which ZooKeeper reserves")
	}
	return nil
}

// parseBytes reads the size of a znode's data: 524288, 512KiB, 1MiB, 64KB...
func parseBytes(s string) (int64, error) {
	n, err := parseSize(s)
	if err != nil {
		return 0, err
	}
	// ZooKeeper's jute.maxbuffer (1 MiB by default) bounds a znode's data.
	if n > 1<<20-1024 {
		return 0, fmt.Errorf("%q is above ZooKeeper's 1 MiB node limit", s)
	}
	return n, nil
}

// parseSize reads a size of at most 1 TiB: 524288, 512KiB, 16MiB, 2GiB, 64KB...
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000}, {"B", 1}}
	mult := int64(1)
	num := strings.TrimSpace(s)
	for _, u := range units {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 1 || n > (1<<40)/mult {
		return 0, fmt.Errorf("%q is not a size such as 524288, 512KiB or 1MiB", s)
	}
	return n * mult, nil
}

// maxQueueItemsCap bounds --max-queue-items: a queue is read in one listing
// of its entries, which must fit the 1 MiB reply a Java client such as
// Curator accepts (jute.maxbuffer): an item's name takes at most 25 bytes
// of it (its sequence is ZooKeeper's 32-bit cversion), and several
// gateways may pass the cap by a sixteenth each.
const maxQueueItemsCap = 30_000

// parseQueueCaps reads the caps of the queues.
func parseQueueCaps(items, bytes, allItems, allBytes string) (recipes.QueueConfig, error) {
	var c recipes.QueueConfig
	var err error
	if c.MaxItems, err = strconv.Atoi(items); err != nil || c.MaxItems < 1 || c.MaxItems > maxQueueItemsCap {
		return c, usagef("--max-queue-items %q must be a whole number from 1 to %d (a queue is listed in one ZooKeeper reply of at most 1 MiB)", items, maxQueueItemsCap)
	}
	if c.MaxTotalItems, err = strconv.Atoi(allItems); err != nil || c.MaxTotalItems < 1 || c.MaxTotalItems > 10_000_000 {
		return c, usagef("--max-queues-items %q must be a whole number from 1 to 10000000", allItems)
	}
	if c.MaxBytes, err = parseSize(bytes); err != nil {
		return c, usagef("--max-queue-bytes: %v", err)
	}
	if c.MaxTotalBytes, err = parseSize(allBytes); err != nil {
		return c, usagef("--max-queues-bytes: %v", err)
	}
	return c, nil
}

// usableDir makes sure dir exists and is writable.
func usableDir(dir string) error {
	if dir == "" {
		return usagef("--data-dir may not be empty")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return usagef("--data-dir %q is not usable: %v", dir, err)
	}
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return usagef("--data-dir %q is not writable: %v", dir, err)
	}
	name := f.Name()
	f.Close()
	os.Remove(name)
	return nil
}
