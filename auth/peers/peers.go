// Package peers is the proof between the gateways of one root: a request
// one gateway passes to another (forwarding, the fan-outs of the lists, a
// handover) carries this gateway's proof, and an answer is relayed only
// once it proves it comes from the gateway asked. The secret and its MACs
// are internal/peer's; this package is what they are put to over HTTP.
// The proofs of the nodes the gateways write in ZooKeeper (registrations,
// lease records) are auth/nodeproof's, which the recipes call as they write
// and read those nodes.
package peers

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/zkgate/zkgate/auth"
	"github.com/zkgate/zkgate/internal/peer"
	"github.com/zkgate/zkgate/recipes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// A gateway passes a request to another (forwarding, and the fan-out of
// GET /v1/leases) only with a proof that it is one, and relays only an
// answer proven to come from the gateway it asked:
//
//   - With the gateways' shared secret (--peer-secret-file), the request
//     carries ForwardedHeader: "v1 from=ID to=ID t=UNIX n=NONCE caller=NAME
//     mac=MAC", the MAC an HMAC-SHA256 over those fields, the method, the
//     path and query, and the SHA-256 of the body. The receiver takes it
//     once (the nonce), within ClockSkew of its own clock, and serves it
//     only when it is the gateway named by to (another, at the address of
//     one gone, answers 421: see handlers.API.forward). Its answer carries
//     answerHeader, an HMAC over the request's nonce, the status, the
//     headers relayed to the client and the SHA-256 of the body, which the
//     sender checks before relaying anything.
//   - Under TLS with --tls-peer-ca, the gateways' certificates are the
//     proof: the sender trusts only that CA for the receiver's, and the
//     receiver takes the request only over a connection whose client
//     certificate that CA signed. The header then has no mac.
//
// A request never carries the client's own secret (Authorization, the
// sign-in cookie): the receiver learns the caller's token by its name, in
// the proof, and applies that token of its own tokens file.

// ForwardedHeader marks a request one gateway passes to another, and
// carries its proof. A request that has it and does not prove it is
// refused; one that proves it is never passed on again.
const ForwardedHeader = "X-Zkgate-Forwarded"

// answerHeader carries the proof of the answer to a forwarded request.
const answerHeader = "X-Zkgate-Answer-Proof"

// ClockSkew is how far apart the clocks of two gateways may be: a
// proof is taken within that much of its time.
const ClockSkew = 5 * time.Minute

// Bounds of what passes between gateways: a forwarded request's body (a
// JSON body is at most 64 KiB), and an answer (a lease list may be long).
const (
	MaxBody   = 1 << 20
	maxAnswer = 64 << 20
	// maxNonces bounds the proofs of one sender remembered against replays:
	// over two windows of 2*ClockSkew, a thousand forwarded requests a
	// second.
	maxNonces = 1 << 20
)

// Credential is how this gateway proves itself to the other gateways of
// its root and checks their proofs. A nil *Credential has none: it forwards
// nothing and takes no forwarded request.
type Credential struct {
	self   string       // this gateway's id
	secret *peer.Secret // nil: none
	tls    *TLS         // nil: plain HTTP
	nonces peer.Nonces
	log    *slog.Logger
	logged atomic.Int64 // when a refusal was last logged (unix nanoseconds)
	// large is held while a body longer than MaxBody is read before
	// its proof is checked (a handover's): one at a time, so that requests
	// that only claim to be a gateway's hold at most one such body; the
	// next waits for it up to largeWait.
	large chan struct{}
	// movedTold is when a client was last told where a lease of this
	// draining gateway went (MovedToHeader), in Unix nanoseconds.
	movedTold atomic.Int64
}

// NoteMoved records that a client was told where a lease went.
func (p *Credential) NoteMoved() { p.movedTold.Store(time.Now().UnixNano()) }

// LastMoved is when a client was last told where a lease of this
// draining gateway went (X-Zkgate-Lease-Moved-To); zero before any.
func (p *Credential) LastMoved() time.Time {
	if n := p.movedTold.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// largeWait bounds the wait of a long body for the one before it.
const largeWait = 30 * time.Second

// TLS is how the gateways reach each other under TLS.
type TLS struct {
	// Transport reaches the other gateways over HTTPS, showing this
	// gateway's certificate; with --tls-peer-ca it trusts that CA alone.
	Transport http.RoundTripper
	// VerifyClient reports whether a connection's client certificate was
	// signed by --tls-peer-ca; nil without it.
	VerifyClient func(*tls.ConnectionState) bool
}

// New returns the peer credential of gateway self: the shared secret
// (nil: none) and, under TLS, the gateways' certificates (nil: plain HTTP).
func New(self string, secret *peer.Secret, tlsPeers *TLS, log *slog.Logger) *Credential {
	if log == nil {
		log = slog.Default()
	}
	return &Credential{self: self, secret: secret, tls: tlsPeers, log: log,
		nonces: peer.Nonces{Window: ClockSkew, Max: maxNonces}, large: make(chan struct{}, 1)}
}

// Proven says whether this gateway can prove itself to the others, and
// check their proofs: whether it may pass requests, and hand its leases
// over, to them.
func (p *Credential) Proven() bool { return p.proven() }

// proven says whether this gateway can prove itself to the others, and
// check their proofs.
func (p *Credential) proven() bool {
	return p != nil && (p.secret != nil || p.tls != nil && p.tls.VerifyClient != nil)
}

// noCredential is the problem of a gateway asked to reach another without
// a way to prove either of them.
const noCredential = "this gateway has no peer credential: give every gateway the same --peer-secret-file " +
	"(zkgate peer-secret new), or under TLS --tls-peer-ca"

// Call is a request another gateway forwarded, once proven.
type Call struct {
	// Gateway is the id of the gateway that forwarded it.
	Gateway string
	// Caller is the name of the token the request was made with on that
	// gateway ("" when tokens are off there).
	Caller string
	nonce  string
	signed bool // proven with the secret: the answer is signed too
}

type callKey struct{}

// CallOf returns the proven peer call of a request, or nil for a client's.
func CallOf(ctx context.Context) *Call {
	pc, _ := ctx.Value(callKey{}).(*Call)
	return pc
}

// proof is the content of ForwardedHeader.
type proof struct {
	from, to, caller, nonce, mac string
	at                           int64 // unix seconds
}

func (f proof) String() string {
	s := "v1 from=" + f.from + " to=" + f.to + " t=" + strconv.FormatInt(f.at, 10) + " n=" + f.nonce + " caller=" + f.caller
	if f.mac != "" {
		s += " mac=" + f.mac
	}
	return s
}

// parseProof reads ForwardedHeader strictly: v1, then each field once, in
// any order; mac may be absent. Ids and names are of [A-Za-z0-9._-].
func parseProof(h string) (proof, error) {
	fields := strings.Fields(h)
	if len(fields) == 0 || fields[0] != "v1" {
		return proof{}, errors.New("not a v1 proof")
	}
	var f proof
	seen := map[string]bool{}
	for _, kv := range fields[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || seen[k] {
			return proof{}, fmt.Errorf("field %q given twice or without a value", k)
		}
		seen[k] = true
		switch k {
		case "from":
			f.from = v
		case "to":
			f.to = v
		case "caller":
			f.caller = v
		case "n":
			f.nonce = v
		case "mac":
			f.mac = v
		case "t":
			at, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return proof{}, errors.New("t is not a unix time")
			}
			f.at = at
		default:
			return proof{}, fmt.Errorf("unknown field %q", k)
		}
	}
	for _, k := range []string{"from", "to", "t", "n", "caller"} {
		if !seen[k] {
			return proof{}, fmt.Errorf("field %s is missing", k)
		}
	}
	if !peerName(f.from, false) || !peerName(f.to, false) || !peerName(f.caller, true) {
		return proof{}, errors.New("a gateway id or caller name outside [A-Za-z0-9._-]")
	}
	if n, err := base64.RawURLEncoding.DecodeString(f.nonce); err != nil || len(n) != 16 {
		return proof{}, errors.New("the nonce is not 16 bytes of URL-safe base64")
	}
	return f, nil
}

// peerName checks a gateway id or token name: 1 to 200 of [A-Za-z0-9._-]
// (or empty, when allowed).
func peerName(s string, empty bool) bool {
	if s == "" {
		return empty
	}
	return PlainName(s, 200)
}

// PlainName says whether s is 1 to most bytes of [A-Za-z0-9._-]: an id or
// a name that a header, a proof or a log line carries as it is.
func PlainName(s string, most int) bool {
	if s == "" || len(s) > most {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// requestFields are what the MAC of a request covers.
func (f proof) requestFields(method, uri string, body []byte) []string {
	sum := sha256.Sum256(body)
	return []string{f.from, f.to, strconv.FormatInt(f.at, 10), f.nonce, f.caller, method, uri, hex.EncodeToString(sum[:])}
}

// refuse is the problem of a forwarded request that does not prove itself.
func (p *Credential) refuse(r *http.Request, why string) error {
	now := time.Now().UnixNano()
	// One line a second at most: anyone may send such requests.
	if last := p.logged.Load(); now-last >= int64(time.Second) && p.logged.CompareAndSwap(last, now) {
		p.log.Warn("refused a request that claims to be forwarded by a gateway", "why", why,
			"remote", r.RemoteAddr, "method", r.Method, "path", r.URL.Path)
	}
	return &recipes.Error{Code: auth.CodeForbidden, Detail: "the " + ForwardedHeader + " header is for gateways: " + why}
}

// Admit checks the proof of a request that carries ForwardedHeader: it
// returns the request with the proven call in its context, or the problem
// to answer (403 for a proof that does not check out). The body, which the
// proof covers, is read up to MaxBody.
func (p *Credential) Admit(r *http.Request) (*http.Request, error) { return p.AdmitUpTo(r, MaxBody) }

// AdmitUpTo is Admit of a route whose body may be as long as limit (at
// least MaxBody is read): a handover's may be hundreds of megabytes.
func (p *Credential) AdmitUpTo(r *http.Request, limit int64) (*http.Request, error) {
	limit = max(limit, MaxBody)
	if !p.proven() {
		return r, &recipes.Error{Code: auth.CodeForbidden, Detail: "the " + ForwardedHeader + " header is for gateways, and " + noCredential}
	}
	f, err := parseProof(r.Header.Get(ForwardedHeader))
	if err != nil {
		return r, p.refuse(r, "malformed: "+err.Error())
	}
	now := time.Now()
	if d := now.Sub(time.Unix(f.at, 0)); d > ClockSkew || d < -ClockSkew {
		return r, p.refuse(r, fmt.Sprintf("the proof's time is %s off this gateway's clock (at most %s)", d.Round(time.Second), ClockSkew))
	}
	signed := p.secret != nil
	if signed {
		if limit > MaxBody && p.large != nil {
			t := time.NewTimer(largeWait)
			select {
			case p.large <- struct{}{}:
				t.Stop()
				defer func() { <-p.large }()
			case <-t.C:
				return r, &recipes.Error{Code: recipes.CodeUnavailable, Detail: "another long body is being read; retry shortly"}
			case <-r.Context().Done():
				t.Stop()
				return r, &recipes.Error{Code: recipes.CodeUnavailable, Detail: "gone while another long body was being read", Err: context.Cause(r.Context())}
			}
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
		if err != nil {
			return r, recipes.Errorf(recipes.CodeInvalid, "could not read the body: %v", err)
		}
		if int64(len(body)) > limit {
			return r, recipes.Errorf(recipes.CodeTooLarge, "the body is larger than %d bytes", limit)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !p.secret.Check(f.mac, "request", f.requestFields(r.Method, r.RequestURI, body)...) {
			return r, p.refuse(r, "its proof does not check out with --peer-secret-file")
		}
	} else if p.tls.VerifyClient == nil || r.TLS == nil || !p.tls.VerifyClient(r.TLS) {
		return r, p.refuse(r, "it did not come over a connection with a certificate of --tls-peer-ca")
	}
	switch err := p.nonces.Take(f.from, f.nonce, now); {
	case errors.Is(err, peer.ErrReplayed):
		return r, p.refuse(r, "its proof was taken before (a replay)")
	case err != nil:
		return r, &recipes.Error{Code: recipes.CodeUnavailable, Detail: "too many requests from gateway " + strconv.Quote(f.from) + " in the last minutes; retry shortly"}
	}
	pc := &Call{Gateway: f.from, Caller: f.caller, nonce: f.nonce, signed: signed}
	r = r.WithContext(context.WithValue(r.Context(), callKey{}, pc))
	if f.to != p.self {
		// Meant for a gateway that was at this address: it is gone, and
		// this one says so, with its proof (see handlers.API.forward).
		return r, &recipes.Error{Code: CodeMisdirected, Detail: "gateway " + strconv.Quote(f.to) + " is not here: this is gateway " +
			strconv.Quote(p.self)}
	}
	return r, nil
}

// Problem codes of the proof between gateways: CodeMisdirected answers a
// proven request meant for another gateway (421); CodeBodyTimeout (408) and
// CodeTooMany (429) are refusals of the front door that may come before a
// forwarded request's proof is checked (see earlyRefusals).
const (
	CodeMisdirected recipes.Code = "misdirected"
	CodeBodyTimeout recipes.Code = "body_timeout"
	CodeTooMany     recipes.Code = "too_many"
)

// Relayed says whether an answer's header is relayed from the gateway that
// answered a forwarded request to the client (and covered by the proof of
// the answer): those the handlers set, and none about the connection.
func Relayed(name string) bool {
	switch name {
	case "Content-Type", "Cache-Control", "Location", "Retry-After", "Www-Authenticate":
		return true
	case ForwardedHeader, answerHeader, ServedByHeader:
		return false
	}
	return strings.HasPrefix(name, "X-Zkgate-")
}

// ServedByHeader names the gateway that answered a forwarded request.
const ServedByHeader = "X-Zkgate-Served-By"

// answerFields are what the MAC of an answer covers: the request's nonce,
// the status, each relayed header and the body's SHA-256.
func answerFields(nonce string, status int, h http.Header, body []byte) []string {
	names := make([]string, 0, 8)
	for k := range h {
		if Relayed(k) {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	sum := sha256.Sum256(body)
	fields := []string{nonce, strconv.Itoa(status), hex.EncodeToString(sum[:])}
	for _, k := range names {
		fields = append(fields, k, strings.Join(h[k], "\n"))
	}
	return fields
}

// HeldAnswer holds the answer to a request that claims to be forwarded
// until it is whole, to be signed (see Credential.Release).
type HeldAnswer struct {
	w      http.ResponseWriter
	status int
	body   bytes.Buffer
}

// Hold returns a writer that holds what is written to it for w.
func Hold(w http.ResponseWriter) *HeldAnswer { return &HeldAnswer{w: w} }

// Header is w's header: what is set there is sent with the answer.
func (a *HeldAnswer) Header() http.Header { return a.w.Header() }

func (a *HeldAnswer) WriteHeader(status int) {
	if a.status == 0 {
		a.status = status
	}
}

func (a *HeldAnswer) Write(b []byte) (int, error) {
	if a.status == 0 {
		a.status = http.StatusOK
	}
	return a.body.Write(b)
}

// Release writes the held answer to r, with its proof when r is a call of
// another gateway proven with the secret (whatever answered it: the route,
// or a refusal of the front door).
func (p *Credential) Release(a *HeldAnswer, r *http.Request) {
	if a.status == 0 {
		a.status = http.StatusOK
	}
	h := a.w.Header()
	if pc := CallOf(r.Context()); pc != nil && pc.signed {
		if a.body.Len() > 0 && h.Get("Content-Type") == "" {
			// What net/http would add after the proof is made.
			h.Set("Content-Type", http.DetectContentType(a.body.Bytes()))
		}
		h.Set(answerHeader, p.secret.Sign("answer", answerFields(pc.nonce, a.status, h, a.body.Bytes())...))
	}
	a.w.WriteHeader(a.status)
	_, _ = a.w.Write(a.body.Bytes())
}

// Answer is the proven answer of another gateway.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// BaseURL is the URL of the gateway at advertise, as this one reaches it.
func (p *Credential) BaseURL(advertise string) string {
	if p != nil && p.tls != nil {
		return "https://" + advertise
	}
	return "http://" + advertise
}

// Ask sends a request to the gateway k: its method, path and query (uri),
// Content-Type and body, with this gateway's proof for caller and no
// client secret. It returns the answer once proven, or an unavailable
// problem: without a peer credential, when k does not answer, or when its
// answer does not prove itself (logged).
func (p *Credential) Ask(ctx context.Context, k recipes.Keeper, method, uri, contentType, requestID, caller string, body []byte) (*Answer, error) {
	if !p.proven() {
		return nil, &recipes.Error{Code: recipes.CodeUnavailable, Detail: "not passed to the gateway at " + k.Advertise + ": " + noCredential}
	}
	transport := http.DefaultTransport
	if p.tls != nil {
		transport = p.tls.Transport
	}
	req, err := http.NewRequestWithContext(ctx, method, p.BaseURL(k.Advertise)+uri, bytes.NewReader(body))
	if err != nil {
		return nil, &recipes.Error{Code: recipes.CodeUnavailable, Detail: "the gateway at " + k.Advertise + " cannot be reached: " + err.Error()}
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if requestID != "" {
		req.Header.Set("X-Request-Id", requestID)
	}
	if trace.SpanContextFromContext(ctx).IsValid() {
		// A traced request's trace goes on at the keeper.
		propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	}
	var n [16]byte
	_, _ = rand.Read(n[:])
	f := proof{from: p.self, to: k.Gateway, caller: caller, nonce: base64.RawURLEncoding.EncodeToString(n[:]), at: time.Now().Unix()}
	if p.secret != nil {
		f.mac = p.secret.Sign("request", f.requestFields(method, req.URL.RequestURI(), body)...)
	}
	req.Header.Set(ForwardedHeader, f.String())
	resp, err := transport.RoundTrip(req)
	if err != nil {
		return nil, &recipes.Error{Code: recipes.CodeUnavailable, Detail: "the gateway at " + k.Advertise + " does not answer", Err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err == nil && len(data) > maxAnswer {
		err = fmt.Errorf("an answer longer than %d bytes", maxAnswer)
	}
	if err != nil {
		return nil, &recipes.Error{Code: recipes.CodeUnavailable, Detail: "the gateway at " + k.Advertise + " did not answer whole", Err: err}
	}
	if p.secret != nil && !p.secret.Check(resp.Header.Get(answerHeader), "answer", answerFields(f.nonce, resp.StatusCode, resp.Header, data)...) {
		if code, detail, ok := earlyRefusal(resp, data); ok {
			p.log.Warn("the gateway refused the request before checking its proof (so its answer carries none): not relayed",
				"gateway", k.Gateway, "advertise", k.Advertise, "status", resp.StatusCode, "code", code, "detail", auth.Clip(detail, 200),
				"request_id", requestID)
			return nil, &recipes.Error{Code: recipes.CodeUnavailable, Detail: fmt.Sprintf("the gateway at %s refused the request: %d %s (%s)",
				k.Advertise, resp.StatusCode, code, auth.Clip(detail, 200))}
		}
		p.log.Warn("refused an answer that does not prove itself: not relayed", "gateway", k.Gateway, "advertise", k.Advertise,
			"status", resp.StatusCode, "request_id", requestID)
		return nil, &recipes.Error{Code: recipes.CodeUnavailable, Detail: "the answer from " + k.Advertise +
			" does not check out with --peer-secret-file: it is not gateway " + strconv.Quote(k.Gateway) + "'s, and is not relayed"}
	}
	return &Answer{Status: resp.StatusCode, Header: resp.Header, Body: data}, nil
}

// earlyRefusals are the problems a gateway may answer a forwarded request
// with before it has checked the request's proof (its body too large or
// too slow, the gateway at a cap or unavailable): such an answer cannot
// carry a proof of its own, since the request did not prove itself.
var earlyRefusals = map[int]recipes.Code{
	http.StatusRequestTimeout:        CodeBodyTimeout,
	http.StatusRequestEntityTooLarge: recipes.CodeTooLarge,
	http.StatusTooManyRequests:       CodeTooMany,
	http.StatusServiceUnavailable:    recipes.CodeUnavailable,
}

// earlyRefusal says whether an answer without a proof is such a refusal,
// with its code and detail, to be logged as what it is rather than as a
// forgery. It is not relayed either way: anyone on the path could have
// sent it.
func earlyRefusal(resp *http.Response, data []byte) (code, detail string, ok bool) {
	want, ok := earlyRefusals[resp.StatusCode]
	if !ok || resp.Header.Get(answerHeader) != "" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
		return "", "", false
	}
	var doc struct {
		Code   string `json:"code"`
		Detail string `json:"detail"`
	}
	if json.Unmarshal(data, &doc) != nil || doc.Code != string(want) {
		return "", "", false
	}
	return doc.Code, doc.Detail, true
}
