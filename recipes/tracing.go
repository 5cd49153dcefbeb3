package recipes

import (
	"context"
	"errors"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// The spans of a traced request (SessionConfig.Tracer; nil: none, and no cost
// beyond a nil check): a wait in line is a span of its own, a child of the
// request's, with the lease, the name, the kind, the mode and the outcome;
// each ZooKeeper round trip made for the request is a child of the span it
// is made under. Whom the wait waits behind is an event of the wait's span
// each time it watches another node: the lease id and holder label of the
// node's lease, where the request's reader allows (WithLeaseReader), else
// none of them. Nothing else of another lease, no session id, no data of a
// node ever goes into a span.

// Span attribute keys.
const (
	attrKind    = attribute.Key("zkgate.kind")
	attrName    = attribute.Key("zkgate.name")
	attrLease   = attribute.Key("zkgate.lease")
	attrMode    = attribute.Key("zkgate.mode")
	attrOutcome = attribute.Key("zkgate.outcome")
	attrToken   = attribute.Key("zkgate.token")
	attrZKOp    = attribute.Key("zkgate.zk.op")
	attrZKPath  = attribute.Key("zkgate.zk.path")
	attrHolder  = attribute.Key("zkgate.holder")
	attrHidden  = attribute.Key("zkgate.hidden")
	attrDBName  = attribute.Key("db.system.name")
)

// noSpan is the span of an untraced call: it records nothing.
func noSpan() trace.Span { return trace.SpanFromContext(context.Background()) }

// traced says whether ctx is a request that s traces: a tracer is set and
// the request's span records.
func (ln *lines) traced(ctx context.Context) bool {
	return ln.sess.cfg.Tracer != nil && trace.SpanFromContext(ctx).IsRecording()
}

// startWait starts the span of a wait of lease for kind's name (mode: a
// lock's), a child of ctx's span; endWait ends it with the wait's outcome.
func (ln *lines) startWait(ctx context.Context, kind, name, mode string, lease *Lease) (context.Context, trace.Span) {
	if !ln.traced(ctx) {
		return ctx, noSpan()
	}
	attrs := []attribute.KeyValue{attrKind.String(kind), attrName.String(name), attrLease.String(lease.ID)}
	if mode != "" {
		attrs = append(attrs, attrMode.String(mode))
	}
	// The request's span says what it acts on too.
	trace.SpanFromContext(ctx).SetAttributes(attrs...)
	return ln.sess.cfg.Tracer.Start(ctx, kind+" wait", trace.WithAttributes(attrs...))
}

// endWait ends sp, a wait's span, with err's outcome (nil: granted) and
// the grant's token, if any.
func endWait(sp trace.Span, err error, token int64) {
	if !sp.IsRecording() {
		return
	}
	sp.SetAttributes(attrOutcome.String(outcome(err)))
	if token != 0 {
		sp.SetAttributes(attrToken.Int64(token))
	}
	if err != nil && ErrorCode(err) == CodeInternal {
		sp.SetStatus(codes.Error, "internal error")
	}
	sp.End()
}

// outcome names how a wait ended, for a span: granted, or the code of its
// error (timeout, deadlock, lease_expired, ...).
func outcome(err error) string {
	if err == nil {
		return "granted"
	}
	if errors.Is(err, ErrMoving) {
		return "moving"
	}
	return string(ErrorCode(err))
}

// zkSpan starts the span of a ZooKeeper round trip, op on p, made for the
// request of ctx; end it with endZK.
func (ln *lines) zkSpan(ctx context.Context, op, p string) trace.Span {
	return startZK(ln.sess.cfg.Tracer, ctx, op, p)
}

// zkSpan is lines.zkSpan, for the session's own round trips.
func (s *Session) zkSpan(ctx context.Context, op, p string) trace.Span {
	return startZK(s.cfg.Tracer, ctx, op, p)
}

func startZK(tr trace.Tracer, ctx context.Context, op, p string) trace.Span {
	if tr == nil || !trace.SpanFromContext(ctx).IsRecording() {
		return noSpan()
	}
	_, sp := tr.Start(ctx, "zk "+op, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attrDBName.String("zookeeper"), attrZKOp.String(op), attrZKPath.String(p)))
	return sp
}

// endZK ends sp, a ZooKeeper round trip's span, with its error.
func endZK(sp trace.Span, err error) {
	if !sp.IsRecording() {
		return
	}
	if err != nil {
		sp.SetStatus(codes.Error, errorClass(err))
	}
	sp.End()
}

// errorClass is what a span says of err: ZooKeeper's error (a fixed text),
// a code of ours, or that the wait was cut; never an error's detail, which
// may name other leases (a deadlock's cause names its cycle's parties).
func errorClass(err error) string {
	var e *Error
	switch {
	case errors.As(err, &e):
		return string(e.Code)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, errWaitElapsed):
		return "cancelled"
	case strings.HasPrefix(err.Error(), "zk: "):
		return err.Error() // go-zookeeper's errors are constants: "zk: node does not exist"
	}
	return "error"
}

// leaseReaderKey holds the reader of a request's spans (see WithLeaseReader).
type leaseReaderKey struct{}

// WithLeaseReader says who reads the spans of ctx's request: mayRead tells
// whether another lease's id and holder label may go into them, given the
// lease's id and its owner (the name of the token that made it; "" when not
// known: a lease of another gateway). Without it (tokens off, or a library
// caller) every one may.
func WithLeaseReader(ctx context.Context, mayRead func(leaseID, owner string) bool) context.Context {
	return context.WithValue(ctx, leaseReaderKey{}, mayRead)
}

// noteBehind adds to ctx's wait span the node c of parent it now waits
// behind: its lease id and holder label, where the reader may see them.
func (ln *lines) noteBehind(ctx context.Context, parent string, c seqNode) {
	if ln.sess.cfg.Tracer == nil {
		return
	}
	sp := trace.SpanFromContext(ctx)
	if !sp.IsRecording() {
		return
	}
	local, isLocal := ln.leases.find(c.Lease)
	owner := ""
	if isLocal {
		owner = local.Owner
	}
	mayRead, limited := ctx.Value(leaseReaderKey{}).(func(string, string) bool)
	if c.Lease == "" || (limited && !mayRead(c.Lease, owner)) {
		sp.AddEvent("behind", trace.WithAttributes(attrHidden.Bool(true)))
		return
	}
	attrs := []attribute.KeyValue{attrLease.String(c.Lease)}
	holder := ""
	if isLocal {
		holder = local.Holder
	} else {
		holder = ln.nodeHolder(ctx, parent, c)
	}
	if holder != "" {
		attrs = append(attrs, attrHolder.String(holder))
	}
	sp.AddEvent("behind", trace.WithAttributes(attrs...))
}

// nodeHolder is the holder label in c's node (a traced round trip).
func (ln *lines) nodeHolder(ctx context.Context, parent string, c seqNode) string {
	sp := ln.zkSpan(ctx, "get", parent)
	data, _, err := ln.sess.Conn().Get(parent + "/" + c.Name)
	endZK(sp, err)
	d, ok := parseNodeData(data)
	if err != nil || !ok {
		return ""
	}
	return d.Holder
}
