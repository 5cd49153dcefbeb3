// Package proc starts the child processes that zkgate and its tests own
// (ZooKeeper's JVM, gateways, the command `zkgate lock` runs): in a process
// group of their own when asked, and, on Linux, killed by the kernel when
// the process that started them dies, even by SIGKILL, so that a crashed
// parent leaves no orphan behind.
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
