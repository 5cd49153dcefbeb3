// Package views holds the templ components of the live dashboard. The same
// components render the first page and every fragment pushed over the
// WebSocket, so a page and its updates can never disagree.
//
// Everything shown comes from ZooKeeper, where anyone may write anything:
// every value goes through templ's escaping, and nothing here uses
// templ.Raw.
package views

import (
	"time"

	"github.com/zkgate/zkgate/recipes"
)

// Page is what the layout of every page needs.
type Page struct {
	Name         string // overview, locks, semaphores, leases, elections, barriers, queues, znodes
	Title        string
	AssetVersion string // content hash of the static files, for cache busting
	Now          time.Time
	Live         bool   // the page subscribes to /ws
	Notice       string // a problem reading ZooKeeper, shown above the page
	Header       Header
	SignedIn     string // the name of the dashboard user's token; "" when tokens are off
	// Admin: the user's token may act on leases (see Lease.Admin).
	Admin bool
}

// Header is the part of every page that updates live: the ZooKeeper state
// and the counts in the navigation.
type Header struct {
	ZK     ZKStatus
	Counts Counts
	// Actions are what admins did from this gateway's dashboard lately.
	Actions []Action
}

// ZKStatus is the gateway's ZooKeeper session.
type ZKStatus struct {
	State     string // live, suspended, connecting, lost, closed
	SessionID string
	Epoch     uint64
	Connect   string // the connect string
	Root      string
	Gateway   string
	Version   string
}

// Counts are the totals shown in the navigation and the overview.
type Counts struct {
	Locks, LockHolders, LockWaiters    int
	Semaphores, SemHolders, SemWaiters int
	Leases, LocalLeases                int
	Elections, Leaderless              int
	Barriers, DoubleBarriers           int
	Queues, QueueItems, QueueClaimed   int
	Groups, GroupMembers               int
	Counters                           int
	Gateways                           int
	WatchedPaths                       int64
	DashboardClients                   int
	// Partial names the kinds with more names than the dashboard reads
	// whole: their holders, waiters and items are counted among the items
	// its pages show.
	Partial []string
}

// ListPage is the part of a long list a page shows: the items after After
// whose name contains Q, at most a page of them.
type ListPage struct {
	Page     string // the dashboard page: locks, semaphores, leases, elections, barriers, queues
	Q        string
	After    string
	Next     string // the After of the next page; "" on the last
	Shown    int
	Matching int // the items whose name contains Q (all of them without Q)
}

// Server is one ZooKeeper server of the connect string, as its `srvr`
// four-letter word describes it.
type Server struct {
	Addr        string
	Mode        string // leader, follower, standalone, observer
	Version     string
	Latency     string // min/avg/max ms
	Connections string
	Outstanding string
	NodeCount   string
	Zxid        string
	Err         string
}

// Rates are request and grant rates from the gateway's own metrics.
type Rates struct {
	API     float64   // API requests per second, over the last few seconds
	Grants  float64   // grants per second, every kind
	ByKind  []Rate    // grants per second by kind
	History []float64 // API requests per second, one per second, oldest first
}

// Rate is a named rate.
type Rate struct {
	Name   string
	PerSec float64
	Total  float64
}

// Gateway is a gateway registered under {root}/gateways.
type Gateway struct {
	recipes.GatewayInfo
	Self bool
}

// Lease is a lease record with what it holds. Local leases (made through
// this gateway) also have their expiry, which only their gateway knows.
type Lease struct {
	ID        string
	Holder    string
	Gateway   string
	TTL       string
	Local     bool
	CreatedAt time.Time
	// ExpiresAt is the confirmed deadline (recipes.LeaseInfo.ExpiresAt),
	// RenewedAt the last keepalive: zero for leases of other gateways.
	ExpiresAt time.Time
	RenewedAt time.Time
	LockDelay string // "" for leases of other gateways
	// Admin shows the controls of an admin: revoke, release a hold.
	Admin bool
	Holds []recipes.HoldInfo
}

// Lock is a lock's holders and waiters; GrantedAt gives the grant time of
// holders whose gateway knows it (its own), by node name.
type Lock struct {
	recipes.LockState
	GrantedAt map[string]time.Time
}

// Semaphore is a semaphore's slot holders and queue.
type Semaphore struct {
	recipes.SemaphoreState
	GrantedAt map[string]time.Time
}

// Overview is the overview page's content.
type Overview struct {
	ZK         ZKStatus
	Servers    []Server
	Gateways   []Gateway
	Counts     Counts
	Rates      Rates
	BusyLocks  []Lock
	Semaphores []Semaphore
	Leases     []Lease
}

// Znode is one znode in the browser.
type Znode struct {
	recipes.DashboardZnode
	Root     string
	View     string // text, json or hex: how the data is shown
	Views    []string
	Shown    string // the data as shown (pretty JSON, text or a hex dump)
	Cut      int    // bytes left out of Shown, if the data is long
	Page     int    // of the children, from 0
	Pages    int
	PageSize int
	Err      string
}

// Contention is the contention page's content: where the time went over a
// window, across every gateway.
type Contention struct {
	Window      string // 1m, 15m or 1h
	Since, Now  time.Time
	Names       []recipes.NameStats      // the most time waited first
	Deadlocks   []recipes.DeadlockRecord // broken in the last hour
	Unreachable []string                 // gateways that did not answer
	Chosen      *ChosenName              // the name whose holds and waits are drawn
	Err         string
}

// ChosenName is one lock or semaphore with its recent holds and waits.
type ChosenName struct {
	recipes.NameStats
	Holds []recipes.HoldRecord
	Waits []recipes.WaitRecord
}

// Counter is a counter as the dashboard shows it: its value in each
// format its bytes fit (it knows no format: a client names it), and its
// version.
type Counter struct {
	Name    string
	Version int32
	Values  map[recipes.CounterFormat]int64
	Bytes   int
	Index   int64
}
