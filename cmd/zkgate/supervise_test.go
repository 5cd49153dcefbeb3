//go:build linux

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// The scripts below start a grandchild of zkgate with its output on
// /dev/null: one holding the test's pipes would keep zkgate's Wait waiting.

// TestKilledZkgateStopsTheGroup: when zkgate lock or elect is killed with
// SIGKILL, what CMD started goes too, not only CMD: its whole process group,
// the watchdog included, is gone.
func TestKilledZkgateStopsTheGroup(t *testing.T) {
	t.Parallel()
	g := cliGateway(t)
	for _, kind := range []string{"lock", "elect"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			z := startZkgate(t, g.URL, nil, kind, "killed-"+kind, "--", "sh", "-c",
				`sleep 301 >/dev/null 2>&1 & echo $! > "$1/grandchild"; echo $$ > "$1/cmd"; wait`, "sh", dir)
			cmd, grandchild := cmdAndGrandchild(t, dir)
			killAndAwaitGroupGone(t, z, cmd, grandchild, cmd)
		})
	}
}

// TestPassedSignalsSpareTheWatchdog: the signals zkgate passes to CMD's
// group, the first sent the moment CMD starts, reach CMD and leave the
// watchdog running, which still stops the group when zkgate is killed.
func TestPassedSignalsSpareTheWatchdog(t *testing.T) {
	t.Parallel()
	g := cliGateway(t)
	dir := t.TempDir()
	names := []string{"USR1", "HUP", "INT", "QUIT", "TERM", "USR2"}
	script := ""
	for _, n := range names {
		script += fmt.Sprintf("trap 'echo %s' %s; ", n, n)
	}
	script += `(trap '' HUP INT QUIT TERM USR1 USR2; exec sleep 301 >/dev/null 2>&1) & echo $! > "$1/grandchild"; echo $$ > "$1/cmd"
kill -USR1 $PPID
while :; do wait; done`
	z := startZkgate(t, g.URL, nil, "lock", "signals", "--", "sh", "-c", script, "sh", dir)
	cmd, grandchild := cmdAndGrandchild(t, dir)
	dog := watchdogOf(t, cmd.Pid)
	for i, n := range names {
		if i > 0 { // CMD sent USR1 itself
			sig := map[string]syscall.Signal{"HUP": syscall.SIGHUP, "INT": syscall.SIGINT, "QUIT": syscall.SIGQUIT,
				"TERM": syscall.SIGTERM, "USR2": syscall.SIGUSR2}[n]
			if err := z.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
		}
		gwtest.Eventually(t, 10*time.Second, func() error {
			if !strings.Contains(z.stdout.String(), n+"\n") {
				return fmt.Errorf("CMD did not get SIG%s: stdout %q, stderr %q", n, z.stdout, z.stderr)
			}
			return nil
		})
	}
	if exited(dog) || exited(grandchild) {
		t.Fatalf("after the passed signals: watchdog exited %v, grandchild exited %v", exited(dog), exited(grandchild))
	}
	killAndAwaitGroupGone(t, z, cmd, grandchild, dog)
}

// killAndAwaitGroupGone kills zkgate z and waits for CMD's process group
// to be empty and each of procs to have exited.
func killAndAwaitGroupGone(t *testing.T, z *zkgate, cmd *os.Process, procs ...*os.Process) {
	t.Helper()
	if err := z.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	z.wait(t, 30*time.Second)
	gwtest.Eventually(t, 10*time.Second, func() error {
		left := groupMembers(t, cmd.Pid)
		for _, p := range procs {
			if !exited(p) {
				return fmt.Errorf("left running in CMD's group %d: %v (pid %d not exited)", cmd.Pid, left, p.Pid)
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("left running in CMD's group %d: %v", cmd.Pid, left)
		}
		return nil
	})
}

// TestEndedCMDLeavesItsGroupAlone: when CMD ends by itself, a process it
// left in the background runs on (zkgate stops nothing it was not asked
// to), and the watchdog, there while CMD ran, has exited with zkgate.
func TestEndedCMDLeavesItsGroupAlone(t *testing.T) {
	t.Parallel()
	g := cliGateway(t)
	dir := t.TempDir()
	z := startZkgate(t, g.URL, nil, "lock", "ended", "--", "sh", "-c",
		`(while [ ! -e "$1/ping" ]; do sleep 0.02; done; echo > "$1/pong"; exec sleep 301) >/dev/null 2>&1 &
echo $! > "$1/grandchild"; echo $$ > "$1/cmd"
while [ ! -e "$1/end" ]; do sleep 0.02; done`, "sh", dir)
	cmd, grandchild := cmdAndGrandchild(t, dir)
	dog := watchdogOf(t, cmd.Pid)
	if err := os.WriteFile(filepath.Join(dir, "end"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := z.wait(t, 30*time.Second); code != 0 || z.stderr.String() != "" {
		t.Fatalf("exit %d: %s", code, z.stderr)
	}
	if !exited(dog) {
		t.Fatalf("the watchdog %d outlived zkgate", dog.Pid)
	}
	if err := os.WriteFile(filepath.Join(dir, "ping"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitForFile(t, filepath.Join(dir, "pong"), 10*time.Second)
	if exited(grandchild) {
		t.Fatal("the grandchild exited without being asked")
	}
}

// TestWatchdogOfAGoneGroup: a group with no process left (its CMD exited
// and was reaped) has nothing to guard: no watchdog, and no error to warn
// of.
func TestWatchdogOfAGoneGroup(t *testing.T) {
	t.Parallel()
	gone := exec.Command("true")
	gone.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	dog, err := startWatchdog(gwtest.Binary(t), gone.Process.Pid)
	if dog != nil || err != nil {
		dog.dismiss()
		t.Fatalf("watchdog of a gone group: %v, %v", dog, err)
	}
}

// cmdAndGrandchild waits for the pids a test's CMD writes to dir (its
// own in dir/cmd, its background child's in dir/grandchild) and returns
// both, held by pidfd so that neither pid can name another process; both
// are killed at the end of the test, with CMD's process group.
func cmdAndGrandchild(t *testing.T, dir string) (cmd, grandchild *os.Process) {
	t.Helper()
	cmdPid := pidIn(t, filepath.Join(dir, "cmd"))
	return held(t, cmdPid), held(t, pidIn(t, filepath.Join(dir, "grandchild")))
}

func pidIn(t *testing.T, path string) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(waitForFile(t, path, 30*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// held returns the running process pid, killed at the end of the test
// with its process group if the test left them running.
func held(t *testing.T, pid int) *os.Process {
	t.Helper()
	p, err := os.FindProcess(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !exited(p) {
			if pgid, err := syscall.Getpgid(pid); err == nil && pgid != syscall.Getpgrp() {
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
			}
			_ = p.Kill()
		}
		_ = p.Release()
	})
	return p
}

// exited tells whether p has exited: reaped, or a zombie left for its new
// parent to reap. p holds a pidfd, so /proc/<pid> is p's while it is not
// reaped.
func exited(p *os.Process) bool {
	return errors.Is(p.Signal(syscall.Signal(0)), os.ErrProcessDone) || !alive(p.Pid)
}

// member is a live process of a process group.
type member struct {
	pid  int
	argv []string
}

func (m member) String() string { return fmt.Sprintf("%d %q", m.pid, m.argv) }

// groupMembers lists the processes of process group pgid that have not
// exited.
func groupMembers(t *testing.T, pgid int) []member {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var ms []member
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // exited meanwhile
		}
		// After "(comm)": state, ppid, pgrp.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) < 3 || fields[0] == "Z" || fields[2] != strconv.Itoa(pgid) {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		ms = append(ms, member{pid, strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")})
	}
	return ms
}

// watchdogOf waits for the watchdog of CMD's process group pgid and
// returns it.
func watchdogOf(t *testing.T, pgid int) *os.Process {
	t.Helper()
	var pid int
	gwtest.Eventually(t, 10*time.Second, func() error {
		ms := groupMembers(t, pgid)
		for _, m := range ms {
			if len(m.argv) > 1 && m.argv[1] == "__watchdog" {
				pid = m.pid
				return nil
			}
		}
		return fmt.Errorf("no watchdog in CMD's group %d: %v", pgid, ms)
	})
	return held(t, pid)
}

// TestKilledZkgateInTheForeground: in the foreground of a terminal, CMD
// shares its process group with zkgate and with the script that called
// zkgate. When zkgate is killed, CMD dies with it; the script goes on, and
// so does what CMD started (the terminal's Ctrl-C or hang-up reach it).
func TestKilledZkgateInTheForeground(t *testing.T) {
	t.Parallel()
	g := cliGateway(t)
	dir := t.TempDir()
	script := `"$1" lock foreground -- sh -c 'sleep 301 >/dev/null 2>&1 & echo $! > "$1/grandchild"; echo $PPID > "$1/zkgate"; echo $$ > "$1/cmd"; wait' sh "$2"
echo $? > "$2/after"
while [ ! -e "$2/end" ]; do sleep 0.02; done`
	caller := exec.Command("sh", "-c", script, "sh", gwtest.Binary(t), dir)
	caller.Env = append(os.Environ(), "ZKGATE_URL="+g.URL, "ZKGATE_TOKEN=")
	var out gwtest.Buffer
	caller.Stdin, caller.Stdout, caller.Stderr = terminal(t), &out, &out
	// The caller leads a session whose terminal is stdin: its process
	// group, and zkgate's, is the terminal's foreground.
	caller.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := caller.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = caller.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-caller.Process.Pid, syscall.SIGKILL)
		<-done
	})
	cmd, grandchild := cmdAndGrandchild(t, dir)
	zkgate := held(t, pidIn(t, filepath.Join(dir, "zkgate")))
	if pgid, err := syscall.Getpgid(cmd.Pid); err != nil || pgid != caller.Process.Pid {
		t.Fatalf("CMD's process group %d (%v), want the caller's %d: zkgate did not see the terminal", pgid, err, caller.Process.Pid)
	}
	if err := zkgate.Kill(); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(waitForFile(t, filepath.Join(dir, "after"), 30*time.Second)); got != "137" {
		t.Fatalf("zkgate's exit status %s, want 137 (SIGKILL); output %q", got, out.String())
	}
	gwtest.Eventually(t, 10*time.Second, func() error {
		if !exited(cmd) {
			return errors.New("CMD outlived zkgate")
		}
		return nil
	})
	if exited(grandchild) {
		t.Fatal("what CMD started was stopped, in the terminal's job")
	}
}

// terminal opens a pseudo-terminal and returns its terminal side, closed
// with its other side at the end of the test.
func terminal(t *testing.T) *os.File {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ptmx.Close() })
	var unlock int32
	var n uint32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); errno != 0 {
		t.Fatal(errno)
	}
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); errno != 0 {
		t.Fatal(errno)
	}
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tty.Close() })
	return tty
}

// TestWatchdogByHandRefuses: `zkgate __watchdog PGID` kills nothing unless
// it runs as zkgate starts it: in the group PGID, its stdin a socket. Each
// run is in a process group of its own, all it could kill, and finds its
// socket closed, as if zkgate had died.
func TestWatchdogByHandRefuses(t *testing.T) {
	t.Parallel()
	bin := gwtest.Binary(t)
	for _, c := range []struct {
		name, pgid string
		socket     bool
	}{
		{"stdin not a socket", "$$", false},
		{"another group", "1", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			cmd := exec.Command("sh", "-c", `exec "$1" __watchdog `+c.pgid, "sh", bin)
			cmd.Stdout, cmd.Stderr = &out, &out
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			var ours *os.File
			if c.socket {
				fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
				if err != nil {
					t.Fatal(err)
				}
				theirs := os.NewFile(uintptr(fds[1]), "theirs")
				defer theirs.Close()
				ours, cmd.Stdin = os.NewFile(uintptr(fds[0]), "ours"), theirs
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if ours != nil {
				ours.Close()
			}
			err := cmd.Wait()
			if cmd.ProcessState.ExitCode() != exitUsage || !strings.Contains(out.String(), "not by hand") {
				t.Fatalf("%v, output %q: want exit %d, killing nothing", err, out.String(), exitUsage)
			}
		})
	}
}
