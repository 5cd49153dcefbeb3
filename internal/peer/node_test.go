package peer

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestNodeProofs: a node proof checks out for the node its gateway made (its
// name, its owner, version 0, every byte of its data) and for nothing else:
// not a copy made by another session, not the data set again, not a field
// changed, added or removed, not another root, purpose or secret. The node's
// data stays a JSON object that readers of earlier versions read as ever.
func TestNodeProofs(t *testing.T) {
	a := mustParse(t, strings.Repeat("a", 32))
	b := mustParse(t, strings.Repeat("b", 32))
	data, _ := json.Marshal(map[string]any{"advertise": "127.0.0.1:1", "draining_until": nil, "proof": "v1"})
	const owner = 0x1234abcd
	signed := a.SignNode("registration", "/root", "gw-1", owner, data)

	var doc map[string]any
	if err := json.Unmarshal(signed, &doc); err != nil || doc["advertise"] != "127.0.0.1:1" || doc["proof"] != "v1" {
		t.Fatalf("the signed data should read as the data with one field more: %s (%v)", signed, err)
	}
	if has, ok := a.CheckNode("registration", "/root", "gw-1", owner, 0, signed); !has || !ok {
		t.Fatalf("the node proof does not check out for its own node: %s", signed)
	}
	changed := bytes.Replace(signed, []byte(`"draining_until":null`), []byte(`"draining_until":"2030-01-01T00:00:00Z"`), 1)
	added := bytes.Replace(signed, []byte(`{`), []byte(`{"handover":true,`), 1)
	removed := bytes.Replace(signed, []byte(`"draining_until":null,`), nil, 1)
	// The data of signed with the proof of other data of the same node.
	other := a.SignNode("registration", "/root", "gw-1", owner, []byte(`{"advertise":"127.0.0.1:2"}`))
	swapped := append(append([]byte(nil), signed[:bytes.LastIndex(signed, []byte(`,"proof2"`))]...),
		other[bytes.LastIndex(other, []byte(`,"proof2"`)):]...)
	for name, c := range map[string]struct {
		secret  *Secret
		purpose string
		root    string
		node    string
		owner   int64
		version int32
		data    []byte
	}{
		"another secret":          {b, "registration", "/root", "gw-1", owner, 0, signed},
		"another purpose":         {a, "lease", "/root", "gw-1", owner, 0, signed},
		"another root":            {a, "registration", "/other", "gw-1", owner, 0, signed},
		"another node":            {a, "registration", "/root", "gw-2", owner, 0, signed},
		"made by another session": {a, "registration", "/root", "gw-1", owner + 1, 0, signed},
		"a persistent node":       {a, "registration", "/root", "gw-1", 0, 0, signed},
		"set again (a replay)":    {a, "registration", "/root", "gw-1", owner, 1, signed},
		"a field changed":         {a, "registration", "/root", "gw-1", owner, 0, changed},
		"a field added":           {a, "registration", "/root", "gw-1", owner, 0, added},
		"a field removed":         {a, "registration", "/root", "gw-1", owner, 0, removed},
		"a space added":           {a, "registration", "/root", "gw-1", owner, 0, bytes.Replace(signed, []byte(`,`), []byte(`, `), 1)},
		"the proof cut short":     {a, "registration", "/root", "gw-1", owner, 0, bytes.Replace(signed, []byte(`"}`), []byte(`x"}`), 1)},
		"another data's proof":    {a, "registration", "/root", "gw-1", owner, 0, swapped},
	} {
		if _, ok := c.secret.CheckNode(c.purpose, c.root, c.node, c.owner, c.version, c.data); ok {
			t.Errorf("%s: the node proof checks out: %s", name, c.data)
		}
	}

	// Data without a node proof is said to be so (a node of an earlier version).
	for _, d := range []string{string(data), `{}`, `{"proof2":""}`, `not json`, ``} {
		if has, ok := a.CheckNode("registration", "/root", "gw-1", owner, 0, []byte(d)); has || ok {
			t.Errorf("%q: read as signed (%v) or checked out (%v)", d, has, ok)
		}
	}
	// An empty object signs too, with no comma before the proof.
	empty := a.SignNode("lease", "/root", "id", owner, []byte(`{}`))
	if err := json.Unmarshal(empty, &doc); err != nil {
		t.Fatalf("an empty object signed is no JSON: %s", empty)
	}
	if _, ok := a.CheckNode("lease", "/root", "id", owner, 0, empty); !ok {
		t.Errorf("the node proof of an empty object does not check out: %s", empty)
	}
}
