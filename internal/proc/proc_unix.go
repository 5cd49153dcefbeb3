//go:build unix && !linux

package proc

import (
	"bytes"
	"os/exec"
	"strconv"
	"syscall"
)

// No Pdeathsig outside Linux: a crashed parent may leave its children running.
func attr(ownGroup bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: ownGroup}
}

func start(cmd *exec.Cmd) error { return cmd.Start() }

// stopped asks ps for the process's state: T when it is stopped.
func stopped(pid int) (bool, error) {
	out, err := exec.Command("ps", "-o", "stat=", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		return false, err
	}
	return bytes.HasPrefix(bytes.TrimSpace(out), []byte("T")), nil
}
