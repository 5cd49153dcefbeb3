// Package kinds is the one registry of the kinds of primitive the gateway
// serves: locks (read/write locks are locks with a mode), semaphores,
// elections, barriers, double barriers, queues, groups and counters. Each kind is one
// descriptor here, and every list of kinds is read from All: the token
// permissions (auth), the directories under --root (recipes), the route
// table (server), the dashboard's table of how it reads and draws each
// kind (dashboard) and the test skeleton (internal/harness/gwtest). Tests check
// that each of those, and openapi.yaml, has every kind of All.
//
// The package imports nothing of zkgate, so that every package can read it.
// Leases, the gateways' records and the lock delays are not kinds: they
// have names and directories of their own, which their owners spell.
package kinds

import "slices"

// Kind describes one kind of primitive.
type Kind struct {
	// Name is the kind's one name: the segment of its routes under /v1/
	// (see Prefix), the KIND of a token's permission KIND:PREFIX:LEVEL, and
	// its directory under --root (see Dir).
	Name string
	// Named is true when the kind's directory holds one child per name,
	// each read on its own; false (barriers) when the directory's children
	// are the whole state of the kind.
	Named bool
}

// The kinds, each the descriptor every package reads.
var (
	Locks          = Kind{Name: "locks", Named: true}
	Semaphores     = Kind{Name: "semaphores", Named: true}
	Elections      = Kind{Name: "elections", Named: true}
	Barriers       = Kind{Name: "barriers"}
	DoubleBarriers = Kind{Name: "double-barriers", Named: true}
	Queues         = Kind{Name: "queues", Named: true}
)

// Groups are group memberships (kazoo's Party, Curator's GroupMember): one
// directory per group, one member node per member.
var Groups = Kind{Name: "groups", Named: true}

// Counters are shared integers, one znode each (recipes/counters.go).
var Counters = Kind{Name: "counters", Named: true}

// All are the kinds, in the order lists of them are written in (the
// directories made under --root, the permission kinds an error names).
func All() []Kind {
	return []Kind{Locks, Semaphores, Elections, Barriers, DoubleBarriers, Queues,
		Groups,
		Counters,
	}
}

// Names are the names of All, in its order.
func Names() []string {
	out := make([]string, 0, len(All()))
	for _, k := range All() {
		out = append(out, k.Name)
	}
	return out
}

// ByName is the kind called name.
func ByName(name string) (Kind, bool) {
	all := All()
	i := slices.IndexFunc(all, func(k Kind) bool { return k.Name == name })
	if i < 0 {
		return Kind{}, false
	}
	return all[i], true
}

// Prefix is the path every route of the kind starts with: /v1/{Name}, the
// list of its names, and /v1/{Name}/{name}... for one of them.
func (k Kind) Prefix() string { return "/v1/" + k.Name }

// Dir is the kind's directory under root (--root): the parent of its names.
func (k Kind) Dir(root string) string { return root + "/" + k.Name }

// Path is the node of the primitive called name of the kind, under root.
func (k Kind) Path(root, name string) string { return k.Dir(root) + "/" + name }

// Permission is the KIND of the permissions that cover the kind.
func (k Kind) Permission() string { return k.Name }
