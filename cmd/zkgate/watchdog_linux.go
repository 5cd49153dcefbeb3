package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
)

// The watchdog stops CMD's process group if zkgate dies. PR_SET_PDEATHSIG
// covers CMD alone: it is per process and cleared on fork, so what CMD
// starts would run on without the lock. The watchdog is zkgate's own
// binary re-executed as `zkgate __watchdog PGID`, placed in CMD's process
// group, and holding one end of a socket pair whose other end only zkgate
// holds. When zkgate dies, for whatever reason, its end closes: the
// watchdog reads EOF and kills its own group with SIGKILL. When CMD ends,
// zkgate writes watchdogQuit and the watchdog exits, leaving the group
// alone. Living in the group keeps the group's id from naming any other
// group while the watchdog waits.
const (
	watchdogArg   = "__watchdog"
	watchdogReady = 'r' // watchdog to zkgate: it ignores the passed signals
	watchdogQuit  = 'q' // zkgate to watchdog: CMD has ended, exit quietly
)

// watchdogMode runs the watchdog when args are its command line, and
// returns its exit code; ok is false for any other command line.
func watchdogMode(args []string) (code int, ok bool) {
	if len(args) != 3 || args[1] != watchdogArg {
		return 0, false
	}
	return runWatchdog(args[2], os.Stdin), true
}

// runWatchdog is the watchdog's life: ctl is its end of the socket pair.
// It refuses to run (exit 2, killing nothing) unless it is in the process
// group pgid and ctl is a socket, as zkgate starts it.
func runWatchdog(pgid string, ctl *os.File) int {
	fi, err := ctl.Stat()
	if pgid != strconv.Itoa(syscall.Getpgrp()) || err != nil || fi.Mode()&os.ModeSocket == 0 {
		fmt.Fprintln(os.Stderr, "zkgate: __watchdog is started by zkgate lock and elect, not by hand")
		return exitUsage
	}
	// zkgate passes these to the whole group, the watchdog included.
	signal.Ignore(passedSignals()...)
	// ps and top show "zkgate", not the "exe" of /proc/self/exe.
	_ = os.WriteFile("/proc/self/comm", []byte("zkgate"), 0)
	var b [1]byte
	if _, err := ctl.Write([]byte{watchdogReady}); err == nil {
		if n, _ := ctl.Read(b[:]); n == 1 && b[0] == watchdogQuit {
			return 0
		}
	}
	// zkgate is gone, and its lease is kept alive no more.
	_ = syscall.Kill(0, syscall.SIGKILL)
	return exitFailed // not reached: SIGKILL went to this process too
}

// watchdog is zkgate's side of a running watchdog.
type watchdog struct {
	proc *exec.Cmd
	ctl  *os.File
}

// guardGroup starts the watchdog of CMD's process group pgid and returns
// once the watchdog ignores the signals zkgate passes to the group, so
// that passing one cannot kill it. It must be called before CMD is
// reaped, so that pgid names CMD's group still. A nil watchdog and nil
// error mean that the group had no process left to guard.
func guardGroup(pgid int) (*watchdog, error) {
	// /proc/self/exe is zkgate's binary even if its file was replaced or
	// removed since zkgate started.
	return startWatchdog("/proc/self/exe", pgid)
}

// startWatchdog is guardGroup with the binary to run as the watchdog.
func startWatchdog(exe string, pgid int) (*watchdog, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("watchdog: %w", err)
	}
	ctl, theirs := os.NewFile(uintptr(fds[0]), "watchdog"), os.NewFile(uintptr(fds[1]), "watchdog")
	proc := exec.Command(exe, watchdogArg, strconv.Itoa(pgid))
	proc.Args[0] = "zkgate"
	proc.Stdin = theirs // stdout and stderr: /dev/null
	proc.Env = []string{"GOMAXPROCS=1"}
	proc.Dir = "/" // keeps no directory of CMD's busy
	proc.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pgid}
	err = proc.Start()
	theirs.Close()
	if err != nil {
		ctl.Close()
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ESRCH) {
			return nil, nil // no process left in the group to join
		}
		return nil, fmt.Errorf("watchdog: %w", err)
	}
	var b [1]byte
	if n, _ := ctl.Read(b[:]); n != 1 || b[0] != watchdogReady {
		ctl.Close()
		_ = proc.Wait()
		return nil, fmt.Errorf("watchdog: ended before it was ready (%s)", proc.ProcessState)
	}
	return &watchdog{proc: proc, ctl: ctl}, nil
}

// dismiss tells the watchdog that CMD has ended and waits for it to exit.
// Dismissing a nil watchdog does nothing.
func (w *watchdog) dismiss() {
	if w == nil {
		return
	}
	_, _ = w.ctl.Write([]byte{watchdogQuit}) // fails if the group was killed, the watchdog with it
	w.ctl.Close()
	_ = w.proc.Wait()
}
