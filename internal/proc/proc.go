// Package proc starts the child processes that zkgate and its tests own
// (ZooKeeper's JVM, gateways, the command `zkgate lock` runs): in a process
// group of their own when asked, and, on Linux, killed by the kernel when
// the process that started them dies, even by SIGKILL, so that a crashed
// parent leaves no orphan behind; and it tells when one has stopped.
package proc

import "os/exec"

// Start starts cmd, replacing its SysProcAttr. With ownGroup it leads a
// process group of its own (Unix): signals sent to the group reach what it
// starts and not its parent, and a terminal's Ctrl-C does not reach it.
// On Linux it gets SIGKILL once its parent dies (PR_SET_PDEATHSIG).
func Start(cmd *exec.Cmd, ownGroup bool) error {
	cmd.SysProcAttr = attr(ownGroup)
	return start(cmd)
}

// Stopped reports whether every thread of the process pid has stopped (by
// SIGSTOP, or a tracer). kill(2) returns once the signal is queued: the
// thread it wakes stops the others only once it runs, and until then they
// run on, long enough under load to answer a request; so a caller that
// needs the process silent waits until this is true.
func Stopped(pid int) (bool, error) { return stopped(pid) }
