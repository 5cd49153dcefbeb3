//go:build !unix

package proc

import (
	"errors"
	"os/exec"
	"syscall"
)

// No process groups and no Pdeathsig without Unix.
func attr(bool) *syscall.SysProcAttr { return nil }

func start(cmd *exec.Cmd) error { return cmd.Start() }

func stopped(int) (bool, error) { return false, errors.ErrUnsupported }
