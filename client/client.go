package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"
)

// Defaults of the options.
const (
	DefaultURL            = "http://127.0.0.1:8080"
	DefaultRetryWindow    = 10 * time.Second
	DefaultConnectRetries = 3
	DefaultPollWait       = 30 * time.Second
	DefaultUserAgent      = "zkgate-go-client/1"
	// maxRetryAfter bounds the pause a Retry-After asks for.
	maxRetryAfter = 5 * time.Second
	// maxAnswer bounds what is read of one answer (a queue item is at most
	// 1 MiB; everything else is far smaller).
	maxAnswer = 16 << 20
)

// Client talks to one zkgate gateway (or a load balancer in front of
// several). It is safe for concurrent use.
type Client struct {
	base           *url.URL
	http           *http.Client
	token          string
	tokenSet       bool // WithToken was given: ZKGATE_TOKEN is not read
	userAgent      string
	retryWindow    time.Duration
	connectRetries int
	pollWait       time.Duration
	injectTrace    func(ctx context.Context, h http.Header) // WithTraceHeaders
}

// An Option configures a Client.
type Option func(*Client)

// WithToken sends "Authorization: Bearer <token>" on every request ("":
// none), instead of $ZKGATE_TOKEN.
func WithToken(token string) Option {
	return func(c *Client) { c.token, c.tokenSet = token, true }
}

// WithHTTPClient sends the requests through h instead of
// http.DefaultClient. Leave h.Timeout zero: every call is bounded by its
// context and its wait, and a timeout shorter than a wait would cut it.
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// WithUserAgent sets the User-Agent of every request.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// WithRetryWindow sets how long the calls that are safe to repeat keep
// retrying transient failures (a connection lost after the request was
// sent, 503, 429) beyond their own wait; DefaultRetryWindow unless set, 0
// turns retries off. Keepalives are retried until the lease would expire,
// whatever this says.
func WithRetryWindow(d time.Duration) Option { return func(c *Client) { c.retryWindow = max(d, 0) } }

// WithConnectRetries sets how many times a call that could not connect to
// the gateway (refused, no route, unknown host: nothing was sent) is tried
// again, within the retry window, before it fails with ErrUnreachable;
// DefaultConnectRetries unless set. A gateway that is down is reported in
// well under a second; more retries ride through a restart instead. A
// call made for a lease (Lock, Campaign, Claim, a release...) is tried
// again past them while the lease's deadline is ahead: the lease lives on,
// and its gateway is on its way back (a restart, a crash it resumes from)
// or its requests go to another.
func WithConnectRetries(n int) Option { return func(c *Client) { c.connectRetries = max(n, 0) } }

// WithPollWait sets the wait of each blocking read a Watcher makes
// (DefaultPollWait unless set). It must not be above the gateway's
// --max-wait.
func WithPollWait(d time.Duration) Option {
	return func(c *Client) {
		if d > 0 {
			c.pollWait = d
		}
	}
}

// New returns a client of the gateway at baseURL, such as
// "http://127.0.0.1:8080" (a path prefix, for a gateway behind a reverse
// proxy, is kept); host:port without a scheme means http://host:port. An
// empty baseURL means $ZKGATE_URL, or DefaultURL when that is empty too;
// without WithToken the token is $ZKGATE_TOKEN, if set. The Python and Node
// clients read the environment the same way.
func New(baseURL string, opts ...Option) (*Client, error) {
	baseURL = strings.TrimSpace(baseURL)
	if baseURL == "" {
		baseURL = strings.TrimSpace(os.Getenv("ZKGATE_URL"))
	}
	if baseURL == "" {
		baseURL = DefaultURL
	}
	if !strings.Contains(baseURL, "://") {
		baseURL = "http://" + baseURL
	}
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("zkgate: gateway URL %q: %v", baseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("zkgate: gateway URL %q must be http:// or https:// and name a host, such as http://127.0.0.1:8080", baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("zkgate: gateway URL %q must have no query, fragment or user info", baseURL)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	c := &Client{base: u, http: http.DefaultClient, userAgent: DefaultUserAgent,
		retryWindow: DefaultRetryWindow, connectRetries: DefaultConnectRetries, pollWait: DefaultPollWait}
	for _, o := range opts {
		o(c)
	}
	if !c.tokenSet {
		c.token = os.Getenv("ZKGATE_TOKEN")
	}
	if c.http == nil {
		c.http = http.DefaultClient
	}
	return c, nil
}

// URL is the gateway's base URL.
func (c *Client) URL() string { return c.base.String() }

// request is one call of the API.
type request struct {
	method  string
	path    string // under the base URL, segments already escaped
	query   url.Values
	body    any    // a JSON body, or nil
	raw     []byte // a raw body (queue items), when rawBody
	rawBody bool

	wait     time.Duration // sent as ?wait=, less the time spent on earlier attempts
	sendWait bool

	// retry marks a call that is safe to repeat: transient failures are
	// retried until wait plus the retry window has passed. okOnRetry lists
	// the codes that mean success when they answer a repeat of a call whose
	// first outcome is unknown (a release that did happen answers not_held
	// when repeated).
	retry     bool
	okOnRetry []string
	// grant marks a call that takes something for a lease (an acquire, a
	// campaign, an enter, a claim): its answer counts only while the lease
	// lives (see Lease.do).
	grant bool
	// until, when set, bounds the retries instead of wait plus the window.
	until time.Time
	// alive, when set, is the deadline of the lease the call is made for
	// (zero: none known): while it is ahead, a gateway that refuses the
	// connection is tried again past the client's connect retries, since
	// the lease lives on and its gateway is on its way back (a restart, a
	// crash resumed) or another takes its requests.
	alive func() time.Time
	// seen, when set, is shown every answer's headers (error answers too)
	// with the send time of its request: a lease learns from them when its
	// gateway says it ends, and where it moved.
	seen func(sent time.Time, h http.Header)
	// target, when set, names the base URL each attempt goes to instead of
	// the client's (nil: the client's): a lease's keeper after a handover.
	// A target that cannot be reached (no connection: nothing was sent) is
	// told to unreachable, and the attempt is made at once at the client's
	// base URL, since any gateway passes the request on.
	target      func() *url.URL
	unreachable func(*url.URL)
}

// response is a successful answer, read whole.
type response struct {
	status int
	header http.Header
	body   []byte
	sent   time.Time // when its request was sent
}

// do sends r and returns the answer if its status is below 400, an *Error
// otherwise. It retries, with backoff, until the wait plus the retry window
// has passed: a call that found no connection (ErrUnreachable once
// connectRetries retries found none either) or was answered 429, whatever
// the call; and when r.retry allows, a connection lost after the request
// was sent and a 503. A call ended by its context returns the context's
// cause.
func (c *Client) do(ctx context.Context, r request) (*response, error) {
	body, contentType, err := r.encode()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	deadline := r.until
	if deadline.IsZero() {
		deadline = start.Add(r.wait + c.retryWindow)
	}
	unknown := false // an earlier attempt may have taken effect
	dials := 0       // attempts that found no connection to the client's URL
	for attempt := 0; ; attempt++ {
		base := c.base
		if r.target != nil {
			if t := r.target(); t != nil {
				base = t
			}
		}
		resp, err := c.once(ctx, base, r.method, r.path, r.queryAt(start), body, contentType, r.seen)
		if err == nil {
			return resp, nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return nil, context.Cause(ctx)
		}
		if base != c.base && notConnected(err) {
			r.unreachable(base)
			attempt--
			continue
		}
		var problem *Error
		transient := true
		if errors.As(err, &problem) {
			if unknown && slices.Contains(r.okOnRetry, problem.Code) {
				return &response{status: http.StatusNoContent, header: http.Header{}}, nil
			}
			transient = problem.Code == "unavailable" || problem.Code == "too_many"
		}
		// No connection, or a 429: nothing was done, so any call may be
		// tried again; a refused connection only a few times, since a
		// gateway that is down should be told at once.
		pause := backoff(attempt)
		if problem != nil && problem.RetryAfter > 0 {
			pause = max(pause, min(problem.RetryAfter, maxRetryAfter))
		}
		refused := problem == nil && notConnected(err)
		if refused {
			dials++
			err = fmt.Errorf("zkgate: %w: no connection to %s in %d attempts: %w", ErrUnreachable, c.base, dials, err)
			if dials > c.connectRetries && !r.livesPast(time.Now().Add(pause)) {
				return nil, err
			}
		} else if !(r.retry && transient || problem != nil && problem.Code == "too_many") {
			return nil, err
		}
		if time.Now().Add(pause).After(deadline) {
			return nil, err
		}
		if !refused && (problem == nil || problem.Code == "unavailable") {
			unknown = true
		}
		if !sleep(ctx, pause) {
			return nil, context.Cause(ctx)
		}
	}
}

// livesPast reports whether the lease r is made for is known to live past t.
func (r request) livesPast(t time.Time) bool {
	if r.alive == nil {
		return false
	}
	d := r.alive()
	return !d.IsZero() && t.Before(d)
}

// encode returns r's body and its content type (none without a body).
func (r request) encode() ([]byte, string, error) {
	switch {
	case r.rawBody:
		return r.raw, "application/octet-stream", nil
	case r.body != nil:
		body, err := json.Marshal(r.body)
		if err != nil {
			return nil, "", fmt.Errorf("zkgate: encode request: %w", err)
		}
		return body, "application/json", nil
	}
	return nil, "", nil
}

// queryAt is r's query for an attempt made after the call started at
// start: with the wait left, when r sends its wait.
func (r request) queryAt(start time.Time) url.Values {
	q := url.Values{}
	for k, v := range r.query {
		q[k] = v
	}
	if r.sendWait {
		left := max(r.wait-time.Since(start), 0)
		q.Set("wait", left.Truncate(time.Millisecond).String())
	}
	return q
}

// sleep waits d, or until ctx ends: false then.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// backoff is the pause before retry number attempt+1: 100ms doubling to
// 2s, with some jitter so that many clients do not retry in step.
func backoff(attempt int) time.Duration {
	d := 100 * time.Millisecond << min(attempt, 5)
	d = min(d, 2*time.Second)
	return d/2 + rand.N(d/2+1)
}

// notConnected reports whether err is a failure to connect: the request
// was not sent.
func notConnected(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" || errors.Is(err, errNoConnection)
}

// movedConnectTimeout bounds the connection to a gateway other than the
// client's own (a lease's keeper, named by X-Zkgate-Lease-Moved-To): its
// address may be out of this client's reach (a gateway's own address,
// behind a load balancer), where a connection attempt can go unanswered
// for minutes; the request goes to the client's URL instead.
const movedConnectTimeout = 2 * time.Second

var errNoConnection = fmt.Errorf("zkgate: no connection within %s", movedConnectTimeout)

// once sends one request to the gateway at base and reads the answer,
// showing its headers to seen (when not nil).
func (c *Client) once(ctx context.Context, base *url.URL, method, path string, q url.Values, body []byte, contentType string,
	seen func(time.Time, http.Header)) (*response, error) {
	u := *base
	u.Path = base.Path + path
	u.RawPath = base.EscapedPath() + path
	u.RawQuery = q.Encode()
	if base != c.base {
		bounded, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		t := time.AfterFunc(movedConnectTimeout, func() { cancel(errNoConnection) })
		defer t.Stop()
		ctx = httptrace.WithClientTrace(bounded, &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { t.Stop() }})
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, fmt.Errorf("zkgate: %w", err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json, application/problem+json, application/octet-stream")
	req.Header.Set("User-Agent", c.userAgent)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	c.setTrace(ctx, req.Header)
	sent := time.Now()
	resp, err := c.http.Do(req)
	if err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, errNoConnection) {
			return nil, fmt.Errorf("%w to %s", cause, base.Host)
		}
		return nil, err
	}
	defer resp.Body.Close()
	if seen != nil {
		seen(sent, resp.Header)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, fmt.Errorf("zkgate: %s %s: reading the answer: %w", method, u.Path, err)
	}
	if resp.StatusCode >= 400 {
		return nil, problemOf(resp, data)
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: data, sent: sent}, nil
}

// decode reads a JSON answer into v.
func (r *response) decode(v any) error {
	if err := json.Unmarshal(r.body, v); err != nil {
		return fmt.Errorf("zkgate: unexpected answer (%d): %v", r.status, err)
	}
	return nil
}

// pathOf joins escaped segments under /v1, after checking that each is a
// name the gateway could accept: no segment may be empty, "." or "..".
func pathOf(segments ...string) (string, error) {
	var b strings.Builder
	b.WriteString("/v1")
	for _, s := range segments {
		if s == "" || s == "." || s == ".." {
			return "", fmt.Errorf("%w: %q is not a valid name", ErrInvalid, s)
		}
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String(), nil
}

// ValidName reports whether name is a valid name of a primitive: 1 to 200
// characters of [A-Za-z0-9._-], neither "." nor "..". The gateway checks the
// same; checking first gives a clear error without a round trip.
func ValidName(name string) error {
	if name == "" || len(name) > 200 || name == "." || name == ".." {
		return fmt.Errorf("%w: a name is 1 to 200 characters of [A-Za-z0-9._-], and not \".\" or \"..\": %q", ErrInvalid, name)
	}
	for i := 0; i < len(name); i++ {
		ch := name[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '.' || ch == '_' || ch == '-') {
			return fmt.Errorf("%w: a name is 1 to 200 characters of [A-Za-z0-9._-], and not \".\" or \"..\": %q", ErrInvalid, name)
		}
	}
	return nil
}

// deleteNamed removes the kind's name (DELETE, safe to repeat).
func (c *Client) deleteNamed(ctx context.Context, kind, name string) error {
	path, err := namePath(kind, name)
	if err != nil {
		return err
	}
	_, err = c.do(ctx, request{method: http.MethodDelete, path: path, retry: true})
	return err
}

// namePath is pathOf(kind, name, rest...) after ValidName(name).
func namePath(kind, name string, rest ...string) (string, error) {
	if err := ValidName(name); err != nil {
		return "", err
	}
	return pathOf(append([]string{kind, name}, rest...)...)
}

// Ready asks the gateway's /readyz once: nil when it answers 200 (it serves
// and its ZooKeeper session is live), ErrUnavailable's *Error when it
// answers otherwise, and the transport's error when it cannot be reached.
func (c *Client) Ready(ctx context.Context) error {
	u := *c.base
	u.Path = c.base.Path + "/readyz"
	u.RawPath = c.base.EscapedPath() + "/readyz"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("zkgate: %w", err)
	}
	req.Header.Set("User-Agent", c.userAgent)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if notConnected(err) {
			return fmt.Errorf("zkgate: %w: no connection to %s: %w", ErrUnreachable, c.base, err)
		}
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	e := problemOf(resp, data)
	e.Code = "unavailable"
	return e
}
