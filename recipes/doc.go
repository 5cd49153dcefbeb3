// Package recipes implements ZooKeeper coordination recipes (leases, locks,
// read/write locks, semaphores, elections, barriers, double barriers,
// queues) on one shared ZooKeeper session. It knows nothing of HTTP: each
// failure is an *Error whose Code the caller maps to its transport
// (errors.go).
//
// # The recipes
//
// A Service bundles them on one Session (service.go, session.go), and each
// recipe gets from it, in New, only what it uses of that session: the
// session's lines (line.go: the session, its armed watches and coalesced
// listings, the hand-overs between its waiters, lock-delay's markers, its
// spans and counts), the watch cache (cache.go), who keeps a lease
// (keepers, contenders.go), and, through of, the same recipe of the
// session of a lease the gateway adopted. Barriers and counters hold no
// lease and get the session and the cache alone. Only the files that make,
// hand over or span the whole bundle (service.go, handover.go, deadlock.go,
// dashboard.go, contentionreport.go) use the Service (layout_test.go).
//
// Each file opens with its znode layout and the Curator or kazoo recipe it
// follows:
//
//   - Leases (leases.go): a lease is what a client holds things with. What
//     it is (LeaseTerms) is one struct, carried whole by Lease, LeaseInfo
//     and the handover's and journal's LeaseState (savedstate.go); its
//     record is an EPHEMERAL node of the gateway's session, a typed
//     leaseRecord with one encoder and one decoder (leaserecord.go),
//     history.go keeps the trace that tells "you lost it" from "you never
//     had it", and locate.go finds the gateway that keeps a lease this one
//     does not.
//   - Locks (locks.go): exclusive and read/write, Curator's
//     InterProcessMutex and InterProcessReadWriteLock.
//   - Semaphores (semaphores.go): Curator's InterProcessSemaphoreV2.
//   - Elections (elections.go): Curator's LeaderLatch.
//   - Barriers (barriers.go) and DoubleBarriers (doublebarriers.go):
//     Curator's DistributedBarrier and DistributedDoubleBarrier.
//   - Queues (queues.go): kazoo's LockingQueue, capped by queuecaps.go.
//   - Groups (groups.go): memberships that kazoo's Party and Curator's
//     GroupMember share.
//
// Around them: lock-delay (lockdelay.go), deadlock detection across
// gateways (deadlock.go), what waits and holds cost (contention.go), the
// handover of a session to another gateway (handover.go), the write-ahead
// record of a session's leases that resumes them after a kill (journal.go),
// the dashboard's view (dashboard.go). Registrations and lease records are
// signed and checked by auth/nodeproof.
//
// # The hold lifecycle
//
// Everything a lease holds or waits for (a lock node, a semaphore slot, a
// candidacy, a double-barrier or group membership, a queue claim) is a hold
// (holds.go): attached to its lease under a key, joined by concurrent calls
// for the same thing (one node, one grant), abandoned by its last waiter if
// never granted nor told to a client, and, once gone, detached with its
// nodes deleted. The recipes keep only how they wait and what they show.
//
// Locks, semaphores and elections wait in a line of sequential nodes
// (line.go): each waits until no earlier node that blocks it is left,
// watching only the one it waits for (contenders.go reads the nodes' names).
//
// # Sharing between the waits and reads of one gateway
//
// Thousands of clients may wait on one name; five mechanisms on Service
// keep ZooKeeper's work near one request per change, not one per waiter:
//
//   - watchCache (cache.go): one watch per read path, fanned out in memory;
//     the State reads and blocking reads of every recipe, the waits of
//     barriers, of queues' takes and claims and of a semaphore's admitted
//     node for a slot, the dashboard.
//   - nodeWatches (nodewatch.go): one armed watch per node however many
//     waits come and go; a line's wait for the node before it (line.go)
//     and a double barrier's wait for its ready node and for members.
//   - lister (lister.go): one listing of a line in flight, one queued, for
//     every waiter woken at once; line.go and hold.ensureInLine.
//   - handoffs (handoff.go): a delete made through this gateway vouches, in
//     its transaction, that the next waiter's node exists; a hold's delete
//     (hold.removeNodes) and the line's wait for it (line.go).
//   - passedWriters (line.go): the writer this gateway last let through a
//     line, whose delete means nothing before the next waiter is left.
package recipes
