package views

// The ids of the elements a live page updates, spelled here once: the
// components carry them, the dashboard's hub pushes its fragments by them
// (replace the element of an id, upsert an item into the list of an id),
// and static/dashboard.js finds its own elements by them (a test checks
// that it names no id of its own).
const (
	IDLive       = "live"     // the stream's state, which the script keeps
	IDZKState    = "zk-state" // the ZooKeeper session's badge in the header
	IDOverview   = "overview"
	IDContention = "contention"
	IDPager      = "pager"
	IDActions    = "actions" // what admins did from the dashboard

	IDLocksSummary     = "locks-summary"
	IDLocksList        = "locks-list"
	IDSemsSummary      = "sems-summary"
	IDSemsList         = "sems-list"
	IDLeasesSummary    = "leases-summary"
	IDLeasesList       = "leases-list"
	IDElectionsSummary = "elections-summary"
	IDElectionsList    = "elections-list"
	IDBarriersSummary  = "barriers-summary"
	IDBarriersList     = "barriers-list"
	IDDBarriersList    = "dbarriers-list"
	IDQueuesSummary    = "queues-summary"
	IDQueuesList       = "queues-list"
	IDGroupsSummary    = "groups-summary"
	IDGroupsList       = "groups-list"

	IDCountersSummary = "counters-summary"
	IDCountersList    = "counters-list"
)

// The ids of the counter of a page in the navigation, and of the items of
// the lists, by their name (a lease's by its id).
func CountID(page string) string         { return "count-" + page }
func LockID(name string) string          { return "lock-" + name }
func SemaphoreID(name string) string     { return "sem-" + name }
func LeaseID(id string) string           { return "lease-" + id }
func ElectionID(name string) string      { return "election-" + name }
func BarrierID(name string) string       { return "barrier-" + name }
func DoubleBarrierID(name string) string { return "dbarrier-" + name }
func QueueID(name string) string         { return "queue-" + name }
func GroupID(name string) string         { return "group-" + name }
func CounterID(name string) string       { return "counter-" + name }

// LiveIDs are every fixed id above, for the check of the script.
func LiveIDs() []string {
	return []string{IDLive, IDZKState, IDOverview, IDContention, IDPager, IDActions,
		IDLocksSummary, IDLocksList, IDSemsSummary, IDSemsList, IDLeasesSummary, IDLeasesList,
		IDElectionsSummary, IDElectionsList, IDBarriersSummary, IDBarriersList, IDDBarriersList, IDQueuesSummary, IDQueuesList,
		IDGroupsSummary, IDGroupsList,
		IDCountersSummary, IDCountersList,
	}
}
