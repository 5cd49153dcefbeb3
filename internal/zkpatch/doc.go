// Package zkpatch holds the tests of the patch zkgate carries on
// go-zookeeper (third_party/go-zookeeper, described in its PATCHES.md):
// batched writes in the send loop, buffered reads in the receive loop and
// CreateWithStat (ZooKeeper's create2). They run against a real standalone
// ZooKeeper server, so that `go test ./...` of zkgate checks the patched
// client, which is a nested module that the suite does not otherwise test.
package zkpatch
