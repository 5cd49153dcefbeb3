//go:build linux

package faults

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// sysProcAttr puts a gateway in its own process group and has the kernel
// kill it when the thread that forked it exits (see startProcess), so that a
// crashed run leaves no gateway behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// Pdeathsig fires when the thread that forked the child exits: children are
// forked from one goroutine locked to its thread for ever (as zkserver does).
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
			runtime.LockOSThread() // never unlocked
			for r := range spawnReqs {
				r.errc <- r.cmd.Start()
			}
		}()
	})
	errc := make(chan error, 1)
	spawnReqs <- spawnReq{cmd: cmd, errc: errc}
	return <-errc
}
