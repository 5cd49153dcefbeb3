package main

import "syscall"

// procAttr puts CMD in a process group of its own when ownGroup, and has
// Linux kill it if zkgate dies (a dead zkgate keeps no lease alive); what
// CMD starts is the watchdog's (watchdog_linux.go).
func procAttr(ownGroup bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: ownGroup, Pdeathsig: syscall.SIGKILL}
}
