package recipes

import "time"

// The contention reports of every gateway of a root: what GET
// /v1/contention and the dashboard show, gathered by asking each gateway
// for its figures (the handlers do the asking).

// ContentionWindows are the windows the figures are read over, by name.
var ContentionWindows = map[string]time.Duration{"1m": time.Minute, "15m": 15 * time.Minute, "1h": time.Hour}

// DefaultContentionWindow is the window of a request that names none.
const DefaultContentionWindow = "15m"

// UnreachableGateway is a gateway that did not give its part of an answer.
type UnreachableGateway struct {
	Gateway   string `json:"gateway"`
	Advertise string `json:"advertise"`
	Error     string `json:"error"`
}

// ContentionReport is the contention of every gateway over a window: the
// names with the most time waited first, and the deadlocks broken.
type ContentionReport struct {
	Window      string               `json:"window"`
	Since       time.Time            `json:"since"`
	Names       []NameStats          `json:"names"`
	Deadlocks   []DeadlockRecord     `json:"deadlocks"`
	Unreachable []UnreachableGateway `json:"unreachable,omitempty"`
}

// NameReport is one lock or semaphore over a window, of every gateway:
// its figures, and the recent holds and waits of zkgate leases.
type NameReport struct {
	NameStats
	Window      string               `json:"window"`
	Since       time.Time            `json:"since"`
	RecentHolds []HoldRecord         `json:"recent_holds"`
	RecentWaits []WaitRecord         `json:"recent_waits"`
	Unreachable []UnreachableGateway `json:"unreachable,omitempty"`
}
