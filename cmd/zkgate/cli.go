package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/zkgate/zkgate/client"
	"github.com/zkgate/zkgate/server"
)

// Exit codes of the client commands (lock, elect, queue, barrier...),
// listed by `zkgate help` and in the README. lock and elect otherwise exit
// with CMD's own code, or 128+N when a signal N ended it.
const (
	exitFailed    = 1   // the gateway answered an error or could not be reached
	exitUsage     = 2   // a bad command line
	exitWaited    = 75  // the wait ended first: lock not granted, not elected, queue empty, barrier still up; CMD not run
	exitLost      = 76  // the lease, lock or leadership was lost while CMD ran; CMD was stopped
	exitCannotRun = 126 // CMD could not be started
	exitNotFound  = 127 // CMD was not found
)

const exitCodesHelp = `Exit codes of lock and elect: CMD's own exit code (128+N if signal N ended it), or
  1    the gateway answered an error, or could not be reached
  2    a bad command line
  75   the wait ended first (lock not granted, not elected): CMD was not run
  76   the lease, lock or leadership was lost (or no keepalive was confirmed in
       time) while CMD ran: CMD got SIGTERM, then SIGKILL after --kill-grace
  126  CMD could not be started; 127 CMD was not found
  128+N  zkgate was interrupted by signal N while it waited
queue take/claim exit 75 when the queue stayed empty, barrier wait when the
barrier stayed up.`

// exitStatus ends zkgate with code, after printing msg (when not empty) as
// one line on stderr.
type exitStatus struct {
	code int
	msg  string
}

func (e *exitStatus) Error() string {
	if e.msg == "" {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.msg
}

func exitWith(code int, format string, args ...any) error {
	return &exitStatus{code: code, msg: fmt.Sprintf(format, args...)}
}

func usageErr(format string, args ...any) error {
	return &server.UsageError{Msg: fmt.Sprintf(format, args...)}
}

// exitCode prints err on stderr as one line and returns the exit code it
// stands for.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var st *exitStatus
	if errors.As(err, &st) {
		if st.msg != "" {
			fmt.Fprintln(stderr, "zkgate:", oneLine(st.msg))
		}
		return st.code
	}
	fmt.Fprintln(stderr, "zkgate:", oneLine(err.Error()))
	var usage *server.UsageError
	if errors.As(err, &usage) {
		return exitUsage
	}
	return exitFailed
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// gatewayFlags are the flags every client command takes.
type gatewayFlags struct {
	url, token string
}

func (g *gatewayFlags) register(fs *flag.FlagSet, getenv func(string) string) {
	def := getenv("ZKGATE_URL")
	if def == "" {
		def = "http://127.0.0.1:8080"
	}
	fs.StringVar(&g.url, "gateway", def, "the gateway's URL (ZKGATE_URL)")
	fs.StringVar(&g.token, "token", getenv("ZKGATE_TOKEN"), "bearer token sent to the gateway (ZKGATE_TOKEN)")
}

func (g *gatewayFlags) client() (*client.Client, error) {
	var opts []client.Option
	if g.token != "" {
		opts = append(opts, client.WithToken(g.token))
	}
	opts = append(opts, client.WithUserAgent("zkgate-cli/"+server.Version))
	c, err := client.New(g.url, opts...)
	if err != nil {
		return nil, usageErr("--gateway: %v", strings.TrimPrefix(err.Error(), "zkgate: "))
	}
	return c, nil
}

// newFlags makes the flag set of a command, whose usage is printed on -h.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseArgs parses fs's flags anywhere before "--" and returns the other
// arguments; with command, what follows the first "--" is returned apart,
// as the command to run. usage is the synopsis printed on -h.
func parseArgs(fs *flag.FlagSet, args []string, command bool, usage string, stderr io.Writer) (pos, cmd []string, err error) {
	left := args
	if command {
		if i := slices.Index(args, "--"); i >= 0 {
			left, cmd = args[:i], args[i+1:]
		}
	}
	for {
		if err := fs.Parse(left); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprintln(stderr, "usage:", usage)
				fs.SetOutput(stderr)
				fs.PrintDefaults()
				fs.SetOutput(io.Discard)
				return nil, nil, usageErr("usage: %s", usage)
			}
			return nil, nil, usageErr("%v (usage: %s)", err, usage)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, cmd, nil
		}
		if rest[0] == "--" && !command {
			return append(pos, rest[1:]...), nil, nil
		}
		pos, left = append(pos, rest[0]), rest[1:]
	}
}

// validName checks a primitive's name as the gateway will, for a clear
// usage error before any request.
func validName(what, name string) error {
	if err := client.ValidName(name); err != nil {
		return usageErr("%s %q is not a valid name: 1 to 200 characters of [A-Za-z0-9._-], not . or ..", what, name)
	}
	return nil
}

// defaultHolder names this process for other clients: host, pid and what
// it runs, at most 200 bytes.
func defaultHolder(what []string) string {
	host, _ := os.Hostname()
	h := fmt.Sprintf("%s[%d] %s", host, os.Getpid(), strings.Join(what, " "))
	if len(h) > 200 {
		h = strings.ToValidUTF8(h[:200], "") // no rune cut in half
	}
	return h
}

// notNegative checks that a duration flag is not negative.
func notNegative(flagName string, d time.Duration) error {
	if d < 0 {
		return usageErr("--%s %s is negative", flagName, d)
	}
	return nil
}

const helpText = `usage: zkgate [command] [flags]

The gateway:
  zkgate [serve] [flags]         serve the HTTP API and the dashboard (zkgate serve -h lists the flags)
  zkgate peer-secret new         a secret for --peer-secret-file, shared by the gateways of a root
  zkgate version                 the version, and the commit and build date of a release (also --version)

The client (every command takes --gateway URL, default $ZKGATE_URL or
http://127.0.0.1:8080, and --token T, default $ZKGATE_TOKEN; -h lists the flags):
  zkgate lock [--wait 30s] [--ttl 10s] [--mode exclusive|read|write] [--semaphore N]
              [--kill-grace 2s] [--lock-delay D] [--holder H] NAME -- CMD [ARGS...]
      run CMD while holding the lock NAME (or a slot of the semaphore NAME), with
      ZKGATE_LOCK, ZKGATE_LEASE, ZKGATE_FENCING_TOKEN and ZKGATE_URL in its environment
  zkgate elect [--value V] [--wait D] [--ttl 10s] [--kill-grace 2s] [--lock-delay D] NAME -- CMD [ARGS...]
      run CMD only while leading the election NAME (ZKGATE_ELECTION, ZKGATE_LEASE,
      ZKGATE_FENCING_TOKEN, ZKGATE_URL in its environment); resign when it ends
  zkgate status [--limit 50] [--json]   who holds, waits for and leads what (--json: all)
  zkgate queue put [--priority 100] NAME [DATA]     (no DATA: read from stdin)
  zkgate queue take [--wait 30s] [--json] NAME
  zkgate queue claim [--wait 30s] [--lease ID | --ttl 5m] [--json] NAME
  zkgate queue ack|nack --lease ID NAME ITEM-ID
  zkgate barrier raise|lower NAME
  zkgate barrier wait [--wait 30s] NAME
  zkgate lease grant [--ttl 60s] [--holder H] | keepalive ID | revoke ID

lock and elect pass stdin, stdout, stderr and signals (HUP, INT, QUIT, TERM, USR1,
USR2) on to CMD, then release, resign and revoke when it ends. If no keepalive is
confirmed in time, CMD gets SIGTERM, then SIGKILL after --kill-grace, so that it is dead
before the lease's deadline (what the gateway promised: with its default --session-timeout
of 10s, 6 to 9.5s ahead after each keepalive); also if the lease is lost, or someone
else leads. If zkgate dies, CMD's process group is killed (Linux; in the foreground of a
terminal, CMD alone).

` + exitCodesHelp + "\n"
