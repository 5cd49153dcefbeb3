//go:build linux

package proc

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"strconv"
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

// stopped reads the state of each thread of pid in /proc: T (stopped) or t
// (stopped by a tracer) for every one. A thread that ends meanwhile runs no
// more.
func stopped(pid int) (bool, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, task := range tasks {
		stat, err := os.ReadFile(dir + task.Name() + "/stat")
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return false, err
		}
		// "tid (comm) state ...", where comm may hold spaces and ")".
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || i+2 >= len(stat) {
			return false, fmt.Errorf("%s%s/stat has no state: %q", dir, task.Name(), stat)
		}
		if state := stat[i+2]; state != 'T' && state != 't' {
			return false, nil
		}
	}
	return true, nil
}
