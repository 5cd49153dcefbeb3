// Package faults is zkgate's fault-injection suite: a 3-node ZooKeeper
// ensemble and three gateway processes (each behind loopback proxies to the
// ensemble, so that it can be cut off), dozens of HTTP clients taking locks,
// writing under them through a fenced register, producing and claiming
// queue items, and holding locks, read/write locks, semaphores and
// leaderships without fencing (working only before their lease's deadline,
// see wallclock.go), each request to a random gateway, while faults are
// injected at random (seeded): ZooKeeper leader and follower killed and
// restarted, a follower paused, gateways paused (SIGSTOP) past the session
// timeout, killed (SIGKILL) and restarted (half the time at once on their
// own address), drained (SIGTERM) and restarted, cut from ZooKeeper and
// healed, clients vanishing mid-wait and leases expiring mid-hold. Every
// answer is recorded with its time, and an observer of the suite's own
// watches ZooKeeper; a checker then verifies the history (see check.go).
// It runs on Linux.
package faults
