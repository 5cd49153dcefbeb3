//go:build unix && !linux

package zkserver

import (
	"os/exec"
	"syscall"
)

// No Pdeathsig outside Linux: a crashed parent may leave the JVM running.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

func startProcess(cmd *exec.Cmd) error { return cmd.Start() }
