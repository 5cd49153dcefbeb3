//go:build linux

package zkserver

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Own process group: signals reach the JVM (and anything it spawns)
		// but not us, and a terminal's Ctrl-C does not race our Stop.
		Setpgid: true,
		// The kernel kills the JVM when its parent dies, even by SIGKILL, so
		// a crashed gateway or test binary leaves no orphan ZooKeeper.
		Pdeathsig: syscall.SIGKILL,
	}
}

// Pdeathsig fires when the *thread* that forked the child exits, not the
// process. Go only ends threads whose goroutine exits while locked to them, so
// a caller doing Start from such a goroutine would get its ZooKeeper killed
// later. Forking from one goroutine locked to its own thread for ever avoids
// that.
var (
	spawnOnce sync.Once
	spawnReqs chan spawnReq
)

type spawnReq struct {
	cmd  *exec.Cmd
	errc chan error
}

func startProcess(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnReqs = make(chan spawnReq)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread must outlive every child
			for r := range spawnReqs {
				r.errc <- r.cmd.Start()
			}
		}()
	})
	errc := make(chan error, 1)
	spawnReqs <- spawnReq{cmd: cmd, errc: errc}
	return <-errc
}
