package server

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
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
	// AllowedHosts are the names, besides IP addresses and localhost, that
	// a gateway without tokens answers requests for (the Host header);
	// "*" answers any. See hostCheck.
	AllowedHosts []string
	// EmbeddedZKCredentials is a folder where the embedded ZooKeeper's
	// client credentials are written, for its user to inspect it (empty:
	// they never leave the process).
	EmbeddedZKCredentials string
	// TrustedProxies are --trusted-proxies (see trustedProxies).
	TrustedProxies trustedProxies

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
	// PeerProofs is --peer-proofs: strict, or compat, which also takes the
	// registrations and lease records of gateways of versions before the
	// node proofs (see auth/nodeproof), for a rolling upgrade.
	PeerProofs string

	// What the security flags load, checked at start so that a bad file is
	// a usage error (exit 2) rather than a failure later.
	tokens     *auth.Tokens
	gatewayTLS *auth.GatewayTLS
	zkSecurity recipes.ZKSecurity
	peerSecret *peer.Secret
	// tracing is what the OTEL_* environment asks of tracing (nil: off).
	tracing *tracingConfig
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
	f := defineFlags(fs, getenv)
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
	for _, step := range []func() error{f.parseEnvBools, f.parseAddresses, f.parseDurations, f.parseCaps, f.parseLog, f.parseLimits} {
		if err := step(); err != nil {
			return Config{}, err
		}
	}
	cfg := &f.cfg
	if err := cfg.parseSecurity(f.zkAuthFile); err != nil {
		return Config{}, err
	}
	tracing, err := parseTracing(getenv)
	if err != nil {
		return Config{}, err
	}
	cfg.tracing = tracing
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
	} else if cfg.EmbeddedZKCredentials != "" {
		return Config{}, usagef("--embedded-zk-credentials is for the embedded ZooKeeper: leave it out with --zk")
	}
	return *cfg, nil
}

// serveFlags are the flags of zkgate serve: those that need no reading
// are set on cfg itself, the others kept as given until checked.
type serveFlags struct {
	cfg Config

	zkFlag, allowedHosts, trustedProxies, sessTimeout, maxWait, maxTTL, drainTimeout, lockDelay, maxLockDelay, maxItem, zkAuthFile, maxLeases, maxLeasesPerToken, leaseRate, maxWaiters, maxWaitersPerToken, maxQueueItems, maxQueueBytes, maxQueuesItems, maxQueuesBytes, maxLeaseHistory, maxWaitersPerName, maxRequestsPerToken, fanOutRate, bodyTimeout, deadlockCheck, metricsNames string
	// The values of ZKGATE_INSECURE and ZKGATE_HANDOVER, and whether they
	// are booleans.
	insecureEnv, handoverEnv string
	insecureErr, handoverErr error
}

// defineFlags defines the flags of zkgate serve on fs, each defaulting to
// its ZKGATE_* variable, named at the end of its usage, and then to its
// built-in default.
func defineFlags(fs *flag.FlagSet, getenv func(string) string) *serveFlags {
	f := &serveFlags{}
	c := &f.cfg
	env := func(name, def string) string {
		if v := getenv(envName(name)); v != "" {
			return v
		}
		return def
	}
	for _, s := range []struct {
		dst              *string
		name, def, usage string
	}{
		{&c.Listen, "listen", "127.0.0.1:8080", "HTTP listen address"},
		{&f.zkFlag, "zk", "", "ZooKeeper ensemble host:port,host:port; empty runs an embedded ZooKeeper"},
		{&c.Root, "root", "/zkgate", "root znode"},
		{&c.DataDir, "data-dir", "./zkgate-data", "data of the embedded ZooKeeper, the sessions a SIGTERM saves for the next start, and the record of each session kept ahead (--handover)"},
		{&c.EmbeddedZKCredentials, "embedded-zk-credentials", "", "write the embedded ZooKeeper's client certificate and key (client.pem) and CA (ca.pem), made anew at each start, into this folder, readable by the gateway's user alone, to inspect it with zkCli.sh or kazoo; empty: they never leave the gateway"},
		{&f.sessTimeout, "session-timeout", "10s", "ZooKeeper session timeout"},
		{&f.maxWait, "max-wait", "5m", "cap on ?wait="},
		{&f.maxTTL, "max-ttl", "1h", "cap on lease TTLs"},
		{&f.drainTimeout, "drain-timeout", "5s", "on SIGTERM, how long the gateway serves on at most: passing requests for the leases it handed over to their keeper (until none came for a second), or, without a handover, letting holders finish (and never less than the latest expires_at it gave)"},
		{&f.lockDelay, "lock-delay", "0s", "after a lease ends without releasing (expired, its gateway gone, revoked by an admin), no grant of what it held for this long, unless the lease asks for its own lock_delay"},
		{&f.maxLockDelay, "max-lock-delay", "1m", "cap on a lease's lock_delay"},
		{&f.maxItem, "max-item-bytes", "512KiB", "cap on queue item size"},
		{&c.LogFormat, "log-format", "text", "text or json"},
		{&c.LogLevel, "log-level", "info", "debug, info, warn or error"},
		{&c.Advertise, "advertise", "", "host:port other gateways use to reach this one; default the listen address"},
		{&f.trustedProxies, "trusted-proxies", "", "the addresses or CIDRs (comma-separated) of the reverse proxies and load balancers in front of the gateway: from them alone the client's address is taken from X-Forwarded-For or Forwarded, for the per-address caps and the logs"},
		{&f.allowedHosts, "allowed-hosts", "", "without --auth-file, the host names (comma-separated) besides IP addresses and localhost that requests may name in their Host header; * allows any (a DNS name lets any web page rebind to the gateway)"},
		{&c.AuthFile, "auth-file", "", "client tokens file (see zkgate token new); turns authentication on"},
		{&c.MetricsListen, "metrics-listen", "", "also serve /metrics, with no token, on this host:port"},
		{&c.DebugListen, "debug-listen", "", "serve net/http/pprof (CPU, heap, goroutine, block and mutex profiles) on this host:port; off when empty"},
		{&c.TLSCert, "tls-cert", "", "serve HTTPS with this PEM certificate (chain), reloaded when it changes"},
		{&c.TLSKey, "tls-key", "", "the PEM private key of --tls-cert"},
		{&c.TLSClientCA, "tls-client-ca", "", "require client certificates signed by these PEM CAs"},
		{&c.TLSPeerCA, "tls-peer-ca", "", "PEM CAs of the other gateways' certificates: the only CAs trusted for forwarding, both ways"},
		{&c.PeerSecretFile, "peer-secret-file", "", "a secret the gateways of one root share (zkgate peer-secret new), so that they forward requests only to each other"},
		{&c.PeerProofs, "peer-proofs", "strict", "with --peer-secret-file: strict believes only the registrations and lease records signed whole for their node; compat also those of gateways of earlier versions, signed over fewer fields (a copy of them replays), only for a rolling upgrade from those versions"},
		{&c.ZKAuth, "zk-auth", "", "authenticate to ZooKeeper as digest:USER:PASSWORD"},
		{&f.zkAuthFile, "zk-auth-file", "", "read --zk-auth from this file"},
		{&c.ZKACL, "zk-acl", "open", "ACL of the nodes the gateway creates: open (world-writable) or creator (all for --zk-auth's identity, read for the world)"},
		{&c.ZKTLSCA, "zk-tls-ca", "", "connect to ZooKeeper over TLS, trusting these PEM CAs"},
		{&c.ZKTLSCert, "zk-tls-cert", "", "client certificate (PEM) for ZooKeeper's TLS port"},
		{&c.ZKTLSKey, "zk-tls-key", "", "the PEM private key of --zk-tls-cert"},
		{&f.maxLeases, "max-leases", "20000", "cap on live leases of this gateway"},
		{&f.maxLeasesPerToken, "max-leases-per-token", "2000", "cap on live leases of one token (tokens off: of one client address)"},
		{&f.leaseRate, "lease-rate", "100", "cap on new leases per second of one token (tokens off: of one client address)"},
		{&f.maxWaiters, "max-waiters", "20000", "cap on requests waiting at once (?wait= above 0)"},
		{&f.maxWaitersPerToken, "max-waiters-per-token", "", "cap on requests waiting at once of one token (tokens off: of one client address); default half of --max-waiters"},
		{&f.maxQueueItems, "max-queue-items", strconv.Itoa(recipes.DefaultMaxQueueItems), "cap on the items of one queue"},
		{&f.maxQueueBytes, "max-queue-bytes", "16MiB", "cap on the bytes of one queue's items"},
		{&f.maxQueuesItems, "max-queues-items", strconv.Itoa(recipes.DefaultMaxQueuesItems), "cap on the items of all queues together, each queue counting 3 more"},
		{&f.maxQueuesBytes, "max-queues-bytes", "64MiB", "cap on the bytes of all queues' items together"},
		{&f.maxLeaseHistory, "max-lease-history", "100000", "cap on the ended leases remembered (410 with the reason), oldest dropped first; they are kept an hour at most"},
		{&f.maxWaitersPerName, "max-waiters-per-name", "10000", "cap on requests waiting at once on one lock, semaphore, election, barrier or queue"},
		{&f.maxRequestsPerToken, "max-requests-per-token", "1000", "cap on requests under way at once of one token (tokens off: of one client address) that do not wait"},
		{&f.fanOutRate, "fan-out-rate", "10", "reads of one token (tokens off: of one client address) that ask every gateway (GET /v1/leases, /v1/contention, .../stats) a second, in bursts of twice as many; one past that waits its turn, up to 1s, then 429"},
		{&f.bodyTimeout, "body-timeout", "10s", "time a client has to send a request's body, from the end of its headers"},
		{&f.deadlockCheck, "deadlock-check", "1s", "a wait for a lock or a semaphore that lasts this long is checked for a deadlock, and again as often while it lasts; in one, the newest wait of the cycle answers 409 deadlock; 0 turns it off"},
		{&f.metricsNames, "metrics-names", "20", "how many locks and semaphores, the busiest, have wait and hold histograms of their own in /metrics; the others add up under name=\"*\""},
	} {
		*s.dst = env(s.name, s.def)
		fs.Var(&typedFlag{p: s.dst, kind: flagKinds[s.name]}, s.name, s.usage+" ("+envName(s.name)+")")
	}
	var handover, insecure bool
	f.handoverEnv, f.insecureEnv = getenv("ZKGATE_HANDOVER"), getenv("ZKGATE_INSECURE")
	handover, f.handoverErr = strconv.ParseBool(env("handover", "true"))
	fs.BoolVar(&c.Handover, "handover", handover, "on SIGTERM, hand the leases over to another gateway (or, without one, to the next start, through --data-dir) instead of ending them; and record each session's leases ahead in --data-dir, so that a start after a kill (SIGKILL, the OOM killer) within the session timeout resumes them (ZKGATE_HANDOVER)")
	insecure, f.insecureErr = strconv.ParseBool(env("insecure", "false"))
	fs.BoolVar(&c.Insecure, "insecure", insecure, "allow a non-loopback --listen without --auth-file: anyone who reaches it owns every lock (ZKGATE_INSECURE)")
	return f
}

// flagKinds say what a flag's value is, for -h, the man pages and
// completion; a flag not named takes a string.
var flagKinds = map[string]string{
	"session-timeout": "duration", "max-wait": "duration", "max-ttl": "duration", "drain-timeout": "duration",
	"lock-delay": "duration", "max-lock-delay": "duration", "body-timeout": "duration", "deadlock-check": "duration",
	"max-item-bytes": "size", "max-queue-bytes": "size", "max-queues-bytes": "size",
	"max-leases": "int", "max-leases-per-token": "int", "lease-rate": "int", "max-waiters": "int",
	"max-waiters-per-token": "int", "max-queue-items": "int", "max-queues-items": "int", "max-lease-history": "int",
	"max-waiters-per-name": "int", "max-requests-per-token": "int", "fan-out-rate": "int", "metrics-names": "int",
	"zk": "list", "allowed-hosts": "list", "trusted-proxies": "list",
	"listen": "host:port", "advertise": "host:port", "metrics-listen": "host:port", "debug-listen": "host:port",
	"auth-file": "file", "tls-cert": "file", "tls-key": "file", "tls-client-ca": "file", "tls-peer-ca": "file",
	"peer-secret-file": "file", "zk-auth-file": "file", "zk-tls-ca": "file", "zk-tls-cert": "file", "zk-tls-key": "file",
	"data-dir": "dir", "embedded-zk-credentials": "dir", "root": "znode",
}

// typedFlag is a flag read as a string (checked after the parse), which
// names what its value is (Kind): a duration, a size (512KiB), an int,
// a list (comma-separated), a file...
type typedFlag struct {
	p    *string
	kind string
}

func (f *typedFlag) String() string {
	if f.p == nil {
		return ""
	}
	return *f.p
}
func (f *typedFlag) Set(s string) error { *f.p = s; return nil }

// Kind is what the value is ("string" when nothing more).
func (f *typedFlag) Kind() string {
	if f.kind == "" {
		return "string"
	}
	return f.kind
}

// envName is the variable of a flag: ZKGATE_ and its name in capitals,
// "_" for "-".
func envName(flag string) string {
	return "ZKGATE_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// parseEnvBools refuses a boolean variable that is not one.
func (f *serveFlags) parseEnvBools() error {
	if f.insecureErr != nil {
		return usagef("ZKGATE_INSECURE %q must be true or false", f.insecureEnv)
	}
	if f.handoverErr != nil {
		return usagef("ZKGATE_HANDOVER %q must be true or false", f.handoverEnv)
	}
	return nil
}

// parseAddresses reads --zk and checks --listen and --root.
func (f *serveFlags) parseAddresses() error {
	var err error
	if f.cfg.ZK, err = parseEnsemble(f.zkFlag); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(f.cfg.Listen); err != nil {
		return usagef("--listen %q is not host:port", f.cfg.Listen)
	}
	if f.cfg.AllowedHosts, err = parseAllowedHosts(f.allowedHosts); err != nil {
		return err
	}
	if f.cfg.TrustedProxies, err = parseTrustedProxies(f.trustedProxies); err != nil {
		return err
	}
	return validRoot(f.cfg.Root)
}

// parseAllowedHosts reads --allowed-hosts: host names, without a port, or
// "*" alone.
func parseAllowedHosts(s string) ([]string, error) {
	var out []string
	for _, h := range strings.Split(s, ",") {
		h = strings.ToLower(strings.TrimSpace(h))
		switch {
		case h == "":
			continue
		case h == "*":
		case strings.ContainsAny(h, ":/*@ []"):
			return nil, usagef("--allowed-hosts: %q is not a host name (give names without a port, or * alone)", h)
		}
		out = append(out, h)
	}
	if len(out) > 1 && slices.Contains(out, "*") {
		return nil, usagef("--allowed-hosts: * allows every host; give it alone")
	}
	return out, nil
}

// parseDurations reads the flags of a duration, each within its bounds.
func (f *serveFlags) parseDurations() error {
	c := &f.cfg
	durations := []struct {
		name     string
		raw      string
		dst      *time.Duration
		min, max time.Duration
	}{
		{"--session-timeout", f.sessTimeout, &c.SessionTimeout, time.Second, 10 * time.Minute},
		{"--max-wait", f.maxWait, &c.MaxWait, time.Second, 24 * time.Hour},
		{"--max-ttl", f.maxTTL, &c.MaxTTL, time.Second, 7 * 24 * time.Hour},
		{"--drain-timeout", f.drainTimeout, &c.DrainTimeout, 0, time.Hour},
		{"--max-lock-delay", f.maxLockDelay, &c.MaxLockDelay, 0, 10 * time.Minute},
		{"--lock-delay", f.lockDelay, &c.LockDelay, 0, 10 * time.Minute},
		{"--body-timeout", f.bodyTimeout, &c.BodyTimeout, time.Second, time.Hour},
		{"--deadlock-check", f.deadlockCheck, &c.DeadlockCheck, 0, time.Minute},
	}
	for _, d := range durations {
		v, err := time.ParseDuration(d.raw)
		if err != nil || v < d.min || v > d.max {
			return usagef("%s %q must be a duration from %s to %s", d.name, d.raw, d.min, d.max)
		}
		*d.dst = v
	}
	if c.DeadlockCheck != 0 && c.DeadlockCheck < minDeadlockCheck {
		return usagef("--deadlock-check %q must be 0 (off) or from %s to 1m", f.deadlockCheck, minDeadlockCheck)
	}
	return nil
}

// parseCaps reads --metrics-names and --max-item-bytes, and checks
// --lock-delay against its cap.
func (f *serveFlags) parseCaps() error {
	c := &f.cfg
	var err error
	if c.MetricsNames, err = strconv.Atoi(f.metricsNames); err != nil || c.MetricsNames < 0 || c.MetricsNames > recipes.ContentionNames {
		return usagef("--metrics-names %q must be a whole number from 0 to %d", f.metricsNames, recipes.ContentionNames)
	}
	if c.LockDelay > c.MaxLockDelay {
		return usagef("--lock-delay %s is above --max-lock-delay %s", c.LockDelay, c.MaxLockDelay)
	}
	if c.MaxItemBytes, err = parseBytes(f.maxItem); err != nil {
		return usagef("--max-item-bytes: %v", err)
	}
	return nil
}

// parseLog checks --log-format and --log-level.
func (f *serveFlags) parseLog() error {
	if f.cfg.LogFormat != "text" && f.cfg.LogFormat != "json" {
		return usagef("--log-format must be text or json")
	}
	switch f.cfg.LogLevel {
	case "debug", "info", "warn", "error":
		return nil
	}
	return usagef("--log-level must be debug, info, warn or error")
}

// parseLimits reads the front door's limits, the lease history's cap and
// the queues' caps.
func (f *serveFlags) parseLimits() error {
	c := &f.cfg
	var err error
	if c.Limits, err = parseLimits(f.maxLeases, f.maxLeasesPerToken, f.leaseRate, f.maxWaiters, f.maxWaitersPerToken, f.maxWaitersPerName, f.maxRequestsPerToken, f.fanOutRate); err != nil {
		return err
	}
	if c.MaxLeaseHistory, err = strconv.Atoi(f.maxLeaseHistory); err != nil || c.MaxLeaseHistory < 1 || c.MaxLeaseHistory > 10_000_000 {
		return usagef("--max-lease-history %q must be a whole number from 1 to 10000000", f.maxLeaseHistory)
	}
	c.Queues, err = parseQueueCaps(f.maxQueueItems, f.maxQueueBytes, f.maxQueuesItems, f.maxQueuesBytes)
	return err
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
