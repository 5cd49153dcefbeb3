package recipes

import (
	"context"
	"errors"

	"github.com/zkgate/zkgate/internal/zk"
	"golang.org/x/sync/errgroup"
)

// How the recipes read ZooKeeper: the error a client sees of a read, and
// the lists and fan-outs of reads every recipe's State and list make.

// readErr maps an error of a read to what a client should see.
func readErr(err error) error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if ambiguous(err) {
		return unavailable()
	}
	if errors.Is(err, errWaitElapsed) {
		return &Error{Code: CodeTimeout, Detail: "the wait elapsed first"}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &Error{Code: CodeTimeout, Detail: "the request was cancelled", Err: err}
	}
	return internal(err, "ZooKeeper read")
}

// children lists p, an absent p being empty.
func (s *Session) children(ctx context.Context, p string) ([]string, error) {
	for {
		kids, _, err := s.Conn().Children(p)
		switch {
		case err == nil:
			return kids, nil
		case errors.Is(err, zk.ErrNoNode):
			return nil, nil
		case ambiguous(err):
			if werr := s.WaitLive(ctx); werr != nil {
				return nil, unavailable()
			}
		default:
			return nil, readErr(err)
		}
	}
}

// listNames is the first step of a list endpoint: after a sync (see fresh),
// the names under dir, and the context its further reads go on with.
func (s *Session) listNames(ctx context.Context, dir string) (context.Context, []string, error) {
	ctx, err := s.fresh(ctx)
	if err != nil {
		return ctx, nil, readErr(err)
	}
	names, err := s.children(ctx, dir)
	return ctx, names, err
}

// forEach runs fn(0..n-1), 32 at a time (go-zookeeper pipelines the
// requests on its one connection), and returns the first error, or ctx's
// once it ends. Every fn runs to its end: none is cancelled by another's
// error, and none starts once ctx has ended.
func forEach(ctx context.Context, n int, fn func(i int) error) error {
	var g errgroup.Group
	g.SetLimit(32)
	for i := 0; i < n && ctx.Err() == nil; i++ {
		g.Go(func() error { return fn(i) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

// readEach is forEach, with the error a client should see.
func readEach(ctx context.Context, n int, fn func(i int) error) error {
	err := forEach(ctx, n, fn)
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return readErr(err)
	}
	return err
}
