//go:build unix

package zkserver

import (
	"errors"
	"os"
	"syscall"
)

// signalGroup signals the JVM's whole process group (it leads its own).
func signalGroup(p *os.Process, sig syscall.Signal) error {
	err := syscall.Kill(-p.Pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil // already gone
	}
	return err
}

func terminateSignal(p *os.Process) error { return signalGroup(p, syscall.SIGTERM) }
func killSignal(p *os.Process) error      { return signalGroup(p, syscall.SIGKILL) }
