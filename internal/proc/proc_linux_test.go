//go:build linux

package proc

import (
	"os/exec"
	"runtime"
	"syscall"
	"testing"
)

// A child outlives the goroutine that asked for it, even one whose thread
// ends with it (Pdeathsig would fire then if the child were forked there),
// and leads its own process group when asked.
func TestChildOutlivesTheThreadThatStartedIt(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		errc <- Start(cmd, true)
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// Another child started and reaped after the first's thread ended
	// proves that time passed on the spawner; the first is still running.
	if err := Start(exec.Command("true"), false); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		t.Fatalf("the child ended with the thread of the goroutine that started it: %v", err)
	default:
	}
	pgid, err := syscall.Getpgid(cmd.Process.Pid)
	if err != nil || pgid != cmd.Process.Pid {
		t.Fatalf("process group %d (%v), want its own, %d", pgid, err, cmd.Process.Pid)
	}
}
