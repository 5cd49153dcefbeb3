//go:build unix && !linux

package proc

import (
	"os/exec"
	"syscall"
)

// No Pdeathsig outside Linux: a crashed parent may leave its children running.
func attr(ownGroup bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: ownGroup}
}

func start(cmd *exec.Cmd) error { return cmd.Start() }
