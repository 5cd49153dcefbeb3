//go:build unix

package recipes

import (
	"errors"
	"os"
	"syscall"
)

// lockFile takes the exclusive lock of f (flock), without waiting: false
// when another open file holds it (a live gateway's journal). The lock goes
// with the file's last descriptor, so with its process, however it dies.
func lockFile(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}
