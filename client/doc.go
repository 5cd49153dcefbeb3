// Package client is the Go client of the zkgate HTTP API: ZooKeeper's
// coordination recipes (locks, read/write locks, semaphores, leader
// election, barriers, double barriers, groups, queues, counters) behind plain HTTP.
//
// It does the hard parts that every client of the API needs:
//
//   - A Lease (from Client.Grant) keeps the deadline the gateway last
//     confirmed (Lease.Deadline: the lease's expires_at, or the end of its
//     gateway's drain, counted on this process's clock) and keeps itself
//     alive on its own goroutine a third of the way to it, riding out
//     network failures and 503s until then. When the deadline comes without
//     a newer confirmation the lease ends at once: its Done channel is
//     closed (also when it is lost or revoked, and Err says why), every
//     call made through the lease is cancelled, and it is revoked at the
//     gateway in the background. Stop the work the lease protects when Done
//     is closed, or a little before the deadline with Lease.Ending. A grant
//     (of Lock, AcquireSemaphore, Campaign, Enter, Claim) answered as or
//     after the lease ended, by the clock, fails with Err instead of being
//     returned: it ends with the lease at the gateway, nothing to release.
//   - A lease rides through its gateway's restart. When a draining
//     gateway's answer about the lease names the gateway it was handed to
//     (X-Zkgate-Lease-Moved-To), the lease's calls (keepalives, releases,
//     acquires, campaigns, claims and acks made through it, and its revoke)
//     go there from then on (Lease.URL); if that gateway cannot be
//     connected to (refused, or no connection within 2s), they go to the
//     client's URL again, since any gateway passes them on. Its 503s are retried, the deadline stays the one the
//     gateway confirmed, and the lease is not lost: the session lives on.
//   - One lease per concurrent holder. The gateway answers a lease's
//     repeated acquire with the same grant, so two goroutines sharing a
//     lease would share one lock and one fencing token; a Lease refuses a
//     second Lock, AcquireSemaphore or Campaign of a name it holds or is
//     acquiring with ErrAlreadyHeld.
//   - Acquire, campaign, enter and claim are idempotent per lease at the
//     gateway, so this package retries them, with the same lease and what is
//     left of the wait, after a network failure or a 503: a lost answer never
//     leaves a second node or a self-deadlock. Releases, resigns, acks and
//     nacks are retried too, and a repeat that finds the work already done
//     (not_held, not_claimed) counts as success. Produce is retried only
//     after a 429 or no connection (nothing was done). A gateway that
//     refuses connections is ErrUnreachable after DefaultConnectRetries
//     retries (WithConnectRetries), in well under a second; a call made for
//     a lease is tried again while the lease's deadline is ahead, so that
//     it rides through its gateway's restart.
//   - New("") reads $ZKGATE_URL (host:port means http://host:port; default
//     DefaultURL) and, without WithToken, $ZKGATE_TOKEN, as the Python and
//     Node clients do.
//   - Every call takes a context.Context. Waits are sent as ?wait= (0: try
//     once, never block; at most the gateway's --max-wait) and the HTTP
//     request is bound by the context, so a cancelled wait leaves nothing
//     behind in ZooKeeper.
//   - Problem documents (RFC 9457) become *Error values that errors.Is
//     matches against one sentinel per problem code: ErrTimeout,
//     ErrLeaseExpired, ErrNotHeld, ErrUnavailable, ErrUnauthenticated...
//   - Lease.Consume runs a function on each item of a queue, claimed one
//     at a time: acked after the function returns nil, nacked (served
//     again) if it returns an error or panics, which ends the loop; it
//     runs until its context or the lease ends (or, with UntilEmpty, a
//     claim finds nothing).
//   - Client.Lease(id) acts for a lease made elsewhere (claims, acks,
//     releases, its Revoke) without keeping it alive; Client.KeepAlive and
//     Client.RevokeLease extend and end a lease by its id.
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
