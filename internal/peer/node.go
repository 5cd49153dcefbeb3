package peer

import (
	"bytes"
	"strconv"
)

// A node proof signs what a gateway writes of itself in ZooKeeper (its
// registration, a lease record) whole: every byte of the node's data, the
// node's name, the session that owns it (its ephemeralOwner) and its data
// version, which is 0: the gateways make such nodes anew, in their own
// session, and never set them. So a node proof holds only for the node its
// gateway made: a copy of it made by another session, the same data set
// again (an older one replayed, or one with a field changed, such as
// draining_until) or any byte changed does not check out. It is the JSON
// object's last field, nodeProofField, whose bytes are not signed: readers
// that do not know it read the rest as ever.
//
// The proofs of versions before it (Sign of a few fields: the lease and its
// gateway, a gateway and its address) are still written beside it, for the
// gateways of those versions during a rolling upgrade.

// nodeProofField starts the proof's field, the last of the object.
const nodeProofField = `,"proof2":"`

// nodePurpose is the purpose of a node proof of purpose.
func nodePurpose(purpose string) string { return purpose + "/node" }

// SignNode returns data (a JSON object, as json.Marshal writes it) with the
// node proof, for purpose, of the node name under root that session owner
// makes now (version 0), as its last field.
func (s *Secret) SignNode(purpose, root, name string, owner int64, data []byte) []byte {
	body := bytes.TrimSuffix(bytes.TrimRight(data, " \n"), []byte("}"))
	proof := s.Sign(nodePurpose(purpose), nodeFields(root, name, owner, 0, body)...)
	out := make([]byte, 0, len(body)+len(nodeProofField)+len(proof)+2)
	out = append(out, body...)
	if bytes.Equal(bytes.TrimSpace(body), []byte("{")) {
		out = append(out, nodeProofField[1:]...) // an empty object: no comma
	} else {
		out = append(out, nodeProofField...)
	}
	return append(append(out, proof...), '"', '}')
}

// CheckNode reads the node proof of data, the data of the node name under
// root, owned by session owner, at data version version. signed says
// whether data carries a node proof at all (a node of an older version
// does not); ok, whether it checks out for this very node.
func (s *Secret) CheckNode(purpose, root, name string, owner int64, version int32, data []byte) (signed, ok bool) {
	body, proof, signed := splitNodeProof(data)
	if !signed {
		return false, false
	}
	if owner == 0 || version != 0 {
		return true, false // not an ephemeral node, or set since it was made: no gateway did that
	}
	return true, s.Check(proof, nodePurpose(purpose), nodeFields(root, name, owner, version, body)...)
}

// splitNodeProof splits data into the bytes its node proof signs and the
// proof; signed is false when data ends with no node proof.
func splitNodeProof(data []byte) (body []byte, proof string, signed bool) {
	if !bytes.HasSuffix(data, []byte(`"}`)) {
		return nil, "", false
	}
	at := bytes.LastIndex(data, []byte(nodeProofField[1:]))
	if at < 0 {
		return nil, "", false
	}
	proof = string(data[at+len(nodeProofField)-1 : len(data)-2])
	if proof == "" || bytes.ContainsAny([]byte(proof), `"\`) {
		return nil, "", false
	}
	body = data[:at]
	if bytes.HasSuffix(body, []byte(",")) {
		body = body[:len(body)-1]
	}
	return body, proof, true
}

// nodeFields are the fields a node proof signs.
func nodeFields(root, name string, owner int64, version int32, body []byte) []string {
	return []string{root, name, strconv.FormatInt(owner, 16), strconv.FormatInt(int64(version), 10), string(body)}
}
