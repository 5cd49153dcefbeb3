// Package client is the Go client of the zkgate HTTP API: ZooKeeper's
// coordination recipes (locks, read/write locks, semaphores, leader
// election, barriers, double barriers, queues) behind plain HTTP.
//
// It does the hard parts that every client of the API needs:
//
//   - A Lease (from Client.Grant) keeps itself alive on its own goroutine,
//     about every third of its TTL, and rides out network failures and 503s
//     until the lease would have expired. Its Done channel is closed when it
//     is lost or revoked and Err says why; every call made through the lease
//     is cancelled at that moment. Stop the work the lease protects when
//     Done is closed.
//   - Acquire, campaign, enter and claim are idempotent per lease at the
//     gateway, so this package retries them, with the same lease and what is
//     left of the wait, after a network failure or a 503: a lost answer never
//     leaves a second node or a self-deadlock. Releases, resigns, acks and
//     nacks are retried too, and a repeat that finds the work already done
//     (not_held, not_claimed) counts as success. Produce is never retried.
//   - Every call takes a context.Context. Waits are sent as ?wait= (0: try
//     once, never block; at most the gateway's --max-wait) and the HTTP
//     request is bound by the context, so a cancelled wait leaves nothing
//     behind in ZooKeeper.
//   - Problem documents (RFC 9457) become *Error values that errors.Is
//     matches against one sentinel per problem code: ErrTimeout,
//     ErrLeaseExpired, ErrNotHeld, ErrUnavailable, ErrUnauthenticated...
//   - A Watcher follows any primitive's state with the gateway's blocking
//     reads and X-Zkgate-Index, delivering each new state on a channel.
//
// Grants carry a fencing token (a ZooKeeper zxid that grows with every
// grant): pass it to the storage the lock protects, and have the storage
// refuse a token smaller than one it has seen, or check it with
// Client.Fence.
//
// The package uses only the standard library.
package client
