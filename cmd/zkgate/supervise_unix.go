//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
	"unsafe"

	"github.com/zkgate/zkgate/internal/proc"
)

// passedSignals are the signals zkgate passes on to CMD. While zkgate still
// waits for the lock or the leadership, any of them ends the wait instead.
func passedSignals() []os.Signal {
	return []os.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGUSR1, syscall.SIGUSR2}
}

// signalRelay receives the passed signals from the start of a command, so
// that none is lost between the wait and the start of CMD.
type signalRelay struct {
	ch chan os.Signal
}

func newSignalRelay() *signalRelay {
	r := &signalRelay{ch: make(chan os.Signal, 8)}
	signal.Notify(r.ch, passedSignals()...)
	return r
}

func (r *signalRelay) stop() { signal.Stop(r.ch) }

// interrupted is the cause of a wait that a signal ended.
type interrupted struct{ sig os.Signal }

func (i interrupted) Error() string { return "interrupted by " + i.sig.String() }

// exitCode is 128+N, as a shell reports a death by signal N.
func (i interrupted) exitCode() int {
	if s, ok := i.sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return exitFailed
}

// waitCtx returns ctx, also cancelled by the first passed signal, and a
// function that ends the relay's watch and returns the signal that came,
// if one did.
func (r *signalRelay) waitCtx(ctx context.Context) (context.Context, func() *interrupted) {
	wctx, cancel := context.WithCancelCause(ctx)
	done, finished := make(chan struct{}), make(chan struct{})
	var got *interrupted
	go func() {
		defer close(finished)
		select {
		case s := <-r.ch:
			got = &interrupted{s}
			cancel(*got)
		case <-done:
		}
	}()
	return wctx, func() *interrupted {
		close(done)
		<-finished
		cancel(nil)
		if got == nil && bySignal(ctx) {
			// main's signal context saw the signal first; it reaches this
			// relay too, as signal.Notify serves every channel.
			select {
			case s := <-r.ch:
				got = &interrupted{s}
			case <-time.After(time.Second):
			}
		}
		return got
	}
}

// bySignal tells whether ctx was cancelled by main's signal.NotifyContext
// (whose cause is the signal) rather than by its caller.
func bySignal(ctx context.Context) bool {
	if ctx.Err() == nil {
		return false
	}
	cause := context.Cause(ctx)
	return cause != context.Canceled && cause != context.DeadlineExceeded
}

// child is CMD, run while a lock or a leadership is held.
type child struct {
	argv           []string
	env            []string // added to zkgate's environment
	stdout, stderr io.Writer
	grace          time.Duration // between SIGTERM and SIGKILL when the hold is lost
}

// outcome is how CMD ended.
type outcome struct {
	code    int  // CMD's exit code, or 128+N if signal N ended it
	stopped bool // zkgate stopped CMD because the hold was lost
}

// run starts CMD and waits for it, passing on the signals r receives.
// When lost is closed, or ctx is cancelled by its caller (not by a signal,
// which CMD gets itself), CMD gets SIGTERM, then SIGKILL after the grace.
//
// Unless zkgate runs in the foreground of a terminal, CMD runs in a process
// group of its own, and signals and the kill go to the whole group, so that
// nothing CMD started keeps working once the hold is lost. In the
// foreground of a terminal CMD shares zkgate's process group, so that it
// can read the terminal and job control works; the terminal sends its
// SIGINT, SIGQUIT and SIGHUP to both, so zkgate does not pass those on, and
// the kill reaches CMD alone.
//
// On Linux, if zkgate itself dies, CMD is killed (PR_SET_PDEATHSIG), and
// so is its whole process group unless zkgate runs in the foreground of a
// terminal (a watchdog, see watchdog_linux.go). In the foreground, the
// group is the terminal's job, which may hold the shell script that called
// zkgate: what CMD started is not stopped.
func (ch *child) run(ctx context.Context, r *signalRelay, lost <-chan struct{}) (outcome, error) {
	interactive := foregroundOfTerminal()
	cmd, dog, err := ch.start(interactive)
	if err != nil {
		return outcome{}, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	pid := cmd.Process.Pid
	send := func(sig syscall.Signal) {
		if interactive {
			_ = syscall.Kill(pid, sig)
		} else {
			_ = syscall.Kill(-pid, sig)
		}
	}
	var killTimer <-chan time.Time
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		send(syscall.SIGTERM)
		killTimer = time.After(ch.grace)
	}
	ctxDone := ctx.Done()
	for {
		select {
		case s := <-r.ch:
			sig := s.(syscall.Signal)
			if interactive && (sig == syscall.SIGINT || sig == syscall.SIGQUIT || sig == syscall.SIGHUP) {
				continue // the terminal sent it to CMD as well
			}
			send(sig)
		case <-lost:
			lost = nil
			stop()
		case <-ctxDone:
			ctxDone = nil
			if !bySignal(ctx) {
				stop()
			}
		case <-killTimer:
			killTimer = nil
			send(syscall.SIGKILL)
		case err := <-exited:
			if stopped && !interactive {
				// Whatever CMD left running in its group goes too. The
				// watchdog, in the group until dismissed, keeps pid from
				// naming another group.
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
			dog.dismiss()
			var exit *exec.ExitError
			if err != nil && !errors.As(err, &exit) {
				return outcome{}, fmt.Errorf("waiting for %s: %v", ch.argv[0], err)
			}
			return outcome{code: codeOf(cmd.ProcessState), stopped: stopped}, nil
		}
	}
}

// start starts CMD, in a process group of its own unless interactive,
// and then the watchdog of that group.
func (ch *child) start(interactive bool) (*exec.Cmd, *watchdog, error) {
	cmd := exec.Command(ch.argv[0], ch.argv[1:]...)
	cmd.Env = append(os.Environ(), ch.env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, ch.stdout, ch.stderr
	if err := proc.Start(cmd, !interactive); err != nil {
		code := exitCannotRun
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			code = exitNotFound
		}
		return nil, nil, exitWith(code, "%s: %v", ch.argv[0], err)
	}
	if interactive {
		return cmd, nil, nil
	}
	// Before CMD is reaped: until then its pid is its group's id.
	dog, err := guardGroup(cmd.Process.Pid)
	if err != nil {
		fmt.Fprintf(ch.stderr, "zkgate: %v: if zkgate dies, what %s started runs on\n", err, ch.argv[0])
	}
	return cmd, dog, nil
}

// codeOf is a process's exit code as a shell reports it.
func codeOf(st *os.ProcessState) int {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}

// foregroundOfTerminal tells whether stdin is a terminal whose foreground
// process group is zkgate's.
func foregroundOfTerminal() bool {
	var pgrp int32
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, 0, uintptr(syscall.TIOCGPGRP), uintptr(unsafe.Pointer(&pgrp)))
	return errno == 0 && int(pgrp) == syscall.Getpgrp()
}
