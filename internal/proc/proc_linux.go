//go:build linux

package proc

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

func attr(ownGroup bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: ownGroup, Pdeathsig: syscall.SIGKILL}
}

// Pdeathsig fires when the thread that forked the child exits, not the
// process. Go ends a thread whose goroutine exits while locked to it, so a
// child started from such a goroutine would be killed then. Children are
// forked from one goroutine locked to its thread for the life of the
// process.
var spawner struct {
	once sync.Once
	reqs chan spawnReq
}

type spawnReq struct {
	cmd  *exec.Cmd
	errc chan error
}

func start(cmd *exec.Cmd) error {
	spawner.once.Do(func() {
		spawner.reqs = make(chan spawnReq)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread outlives every child
			for r := range spawner.reqs {
				r.errc <- r.cmd.Start()
			}
		}()
	})
	errc := make(chan error, 1)
	spawner.reqs <- spawnReq{cmd: cmd, errc: errc}
	return <-errc
}
