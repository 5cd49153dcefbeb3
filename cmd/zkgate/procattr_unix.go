//go:build unix && !linux

package main

import "syscall"

// procAttr puts CMD in a process group of its own when ownGroup.
func procAttr(ownGroup bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: ownGroup}
}
