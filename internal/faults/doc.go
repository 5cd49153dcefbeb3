// Package faults is zkgate's fault-injection suite: a 3-node ZooKeeper
// ensemble and three gateway processes (each behind loopback proxies to the
// ensemble, so that it can be cut off), dozens of HTTP clients taking locks,
// writing under them through a fenced register, and producing and claiming
// queue items, each request to a random gateway, while faults are injected
// at random (seeded): ZooKeeper leader and follower killed and restarted,
// gateways paused (SIGSTOP) past the session timeout, killed (SIGKILL) and
// restarted, cut from ZooKeeper and healed, clients vanishing mid-wait and
// leases expiring mid-hold. Every answer is recorded with its time; a
// checker then verifies the history (see check.go). It runs on Linux.
package faults
