//go:build unix

package proc

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestStopped: a process of many running threads counts as stopped once
// SIGSTOP has stopped it whole, and no more once SIGCONT lets it go on.
func TestStopped(t *testing.T) {
	if os.Getenv("ZKGATE_PROC_SPIN") != "" {
		// The child: a thread busy on each CPU, until its stdin closes.
		var spins atomic.Int64
		for range runtime.GOMAXPROCS(0) {
			go func() {
				for {
					spins.Add(1)
				}
			}()
		}
		fmt.Println("spinning")
		_, _ = io.Copy(io.Discard, os.Stdin)
		return
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestStopped$")
	cmd.Env = append(os.Environ(), "ZKGATE_PROC_SPIN=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := Start(cmd, false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	defer stdin.Close()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); line != "spinning\n" {
		t.Fatalf("the child said %q (%v), not that it spins", line, err)
	}
	pid := cmd.Process.Pid
	if is, err := Stopped(pid); is || err != nil {
		t.Fatalf("a running process: stopped %v (%v)", is, err)
	}
	within(t, pid, true, syscall.SIGSTOP)
	within(t, pid, false, syscall.SIGCONT)
	if _, err := Stopped(1 << 30); err == nil {
		t.Fatal("no error for a process that does not exist")
	}
}

// within sends sig to pid and waits, bounded, until Stopped says want.
func within(t *testing.T, pid int, want bool, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		is, err := Stopped(pid)
		if err != nil {
			t.Fatal(err)
		}
		if is == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: stopped %v, want %v", sig, is, want)
		}
		time.Sleep(time.Millisecond)
	}
}
