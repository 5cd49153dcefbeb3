//go:build !unix

package zkserver

import (
	"errors"
	"os"
)

// Without POSIX signals there is no graceful stop: both end the process.
func terminateSignal(p *os.Process) error { return killSignal(p) }

func killSignal(p *os.Process) error {
	if err := p.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}
