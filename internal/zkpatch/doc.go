// Package zkpatch holds the tests of the patch zkgate carries on
// go-zookeeper (internal/zk, described in its PATCHES.md): batched writes in
// the send loop, buffered reads in the receive loop and CreateWithStat
// (ZooKeeper's create2). They run against a real standalone ZooKeeper
// server, from outside the package, as zkgate uses it.
package zkpatch
