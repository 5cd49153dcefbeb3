package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/zkgate/zkgate/client"
	"github.com/zkgate/zkgate/server"
)

// Exit codes of the client commands (lock, elect, queue, barrier...),
// listed by `zkgate help` and in docs/cli.md. lock and elect otherwise exit
// with CMD's own code, or 128+N when a signal N ended it.
const (
	exitFailed      = 1   // the gateway refused the operation, or it failed
	exitUsage       = 2   // a bad command line
	exitUnavailable = 69  // the gateway could not be reached, or stayed unavailable (503) through the retries: EX_UNAVAILABLE
	exitWaited      = 75  // the wait ended first: lock not granted, not elected, queue empty, barrier still up; CMD not run
	exitLost        = 76  // the lease, lock or leadership was lost while CMD ran; CMD was stopped
	exitCannotRun   = 126 // CMD could not be started
	exitNotFound    = 127 // CMD was not found
)

// exitCodesHelp is the table of exit codes that `zkgate help` ends with.
const exitCodesHelp = `Exit codes:
  0    done (lock and elect: CMD's own exit code, 128+N if signal N ended it)
  1    the gateway refused the operation or it failed (an error answer: 409,
       404, 401/403...), in one line with the gateway's detail
  2    a bad command line
  69   the gateway could not be reached at --gateway (ZKGATE_URL), or stayed
       unavailable (503) through the retries
  75   the wait ended first: lock not granted, not elected, queue empty,
       barrier still up (lock and elect: CMD was not run)
  76   the lease, lock or leadership was lost (or no keepalive was confirmed
       in time) while CMD ran: CMD got SIGTERM, then SIGKILL after --kill-grace
  126  CMD could not be started; 127 CMD was not found
  128+N  zkgate was interrupted by signal N while it waited`

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

// app is what every command shares: the process's environment and
// streams, and the gateway the client command talks to, once known, so
// that its errors can name it.
type app struct {
	getenv         func(string) string
	stdout, stderr io.Writer
	gateway        string
	gatewayFrom    string // how the gateway was named: --gateway, ZKGATE_URL or the default
	tokenSent      bool
}

// defaultGateway is the gateway of the client commands without --gateway
// or ZKGATE_URL.
const defaultGateway = "http://127.0.0.1:8080"

// gatewayFlags are the flags every client command takes. --gateway and
// --token fall back to ZKGATE_URL and ZKGATE_TOKEN when they are used, not
// as the flags' defaults: -h and the man pages never show a token.
type gatewayFlags struct {
	url, token string
	quiet      bool
	flags      *pflag.FlagSet
	app        *app
}

func (g *gatewayFlags) register(cmd *cobra.Command, a *app) {
	fs := cmd.Flags()
	g.flags, g.app = fs, a
	fs.StringVar(&g.url, "gateway", "", "the gateway's URL (default $ZKGATE_URL, else http://127.0.0.1:8080); host:port alone means http://host:port")
	fs.StringVar(&g.token, "token", "", "bearer token sent to the gateway (default $ZKGATE_TOKEN)")
	fs.BoolVarP(&g.quiet, "quiet", "q", false, "print no progress or information on stderr, only errors (for cron)")
}

// info prints a line of information on stderr, unless --quiet.
func (g *gatewayFlags) info(format string, args ...any) {
	if !g.quiet {
		fmt.Fprintf(g.app.stderr, "zkgate: "+format+"\n", args...)
	}
}

func (g *gatewayFlags) client() (*client.Client, error) {
	url, from := g.url, "--gateway"
	if !g.flags.Changed("gateway") {
		url, from = g.app.getenv("ZKGATE_URL"), "ZKGATE_URL"
		if url == "" {
			url, from = defaultGateway, "the default gateway"
		}
	}
	token := g.token
	if !g.flags.Changed("token") {
		token = g.app.getenv("ZKGATE_TOKEN")
	}
	url = withScheme(url)
	var opts []client.Option
	if token != "" {
		opts = append(opts, client.WithToken(token))
	}
	opts = append(opts, client.WithUserAgent("zkgate-cli/"+server.Version))
	c, err := client.New(url, opts...)
	if err != nil {
		return nil, usageErr("%s: %v", from, strings.TrimPrefix(err.Error(), "zkgate: "))
	}
	g.app.gateway, g.app.gatewayFrom, g.app.tokenSent = c.URL(), from, token != ""
	return c, nil
}

// withScheme reads a gateway named without a scheme, 127.0.0.1:8080 or
// gw.example:8080, as http:// (as etcdctl and consul do), rather than as
// a URL whose scheme would be the host.
func withScheme(url string) string {
	url = strings.TrimSpace(url)
	if url != "" && !strings.Contains(url, "://") {
		return "http://" + url
	}
	return url
}

// explain turns what the gateway's client answered into the one line and
// exit code that tell the user what to do: where no gateway answered,
// which URL was tried and how to name another; where the token was
// refused, which variable to set.
func (a *app) explain(err error) error {
	var st *exitStatus
	var usage *server.UsageError
	if err == nil || errors.As(err, &st) || errors.As(err, &usage) || a.gateway == "" {
		return err
	}
	where := fmt.Sprintf("the gateway at %s (%s)", a.gateway, a.gatewayFrom)
	if cause, ok := dialFailure(err); ok {
		return exitWith(exitUnavailable, "cannot reach %s: %s; start it (zkgate serve) or name the right one with --gateway URL or ZKGATE_URL",
			where, cause)
	}
	var problem *client.Error
	if !errors.As(err, &problem) {
		return err
	}
	switch {
	case errors.Is(err, client.ErrUnavailable):
		return exitWith(exitUnavailable, "%v; %s stayed unavailable through the retries: try again later, or another gateway with --gateway URL or ZKGATE_URL",
			err, where)
	case errors.Is(err, client.ErrUnauthenticated) && !a.tokenSent:
		return fmt.Errorf("%s wants a token: set ZKGATE_TOKEN (or --token) to one (zkgate token new makes them)", where)
	case errors.Is(err, client.ErrUnauthenticated):
		return fmt.Errorf("%s refused the token: set ZKGATE_TOKEN (or --token) to a token of its --auth-file (%s)", where, problem.Detail)
	case errors.Is(err, client.ErrForbidden):
		return fmt.Errorf("%v; set ZKGATE_TOKEN (or --token) to a token that has that permission", err)
	}
	return err
}

// dialFailure reports whether err is a failure to connect to the gateway
// (nothing was sent: refused, no route, no such host, no answer), with
// its cause in a few words.
func dialFailure(err error) (string, bool) {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return fmt.Sprintf("no such host %s", dns.Name), true
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		return "", false
	}
	var errno syscall.Errno
	switch {
	case errors.As(op.Err, &errno):
		return errno.Error(), true
	case errors.Is(op.Err, os.ErrDeadlineExceeded):
		return "no answer to the connection", true
	}
	return op.Err.Error(), true
}

// argsAndCommand splits a command's arguments at "--": the names before,
// the command to run after.
func argsAndCommand(cmd *cobra.Command, args []string) (pos, argv []string) {
	if at := cmd.ArgsLenAtDash(); at >= 0 {
		return args[:at], args[at:]
	}
	return args, nil
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
