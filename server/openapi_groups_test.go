package server_test

import (
	"testing"
)

// groups drives /v1/groups: joins (one idempotent, one making its lease),
// a blocking read woken by a join, the list, leaves and their errors.
func (s *specChecker) groups(t *testing.T) {
	p, q := s.newLease(t, "p"), s.newLease(t, "q")
	join := func(lease, member string) map[string]any {
		return map[string]any{"lease": lease, "member": member, "value": "10.0.0.1:80"}
	}
	st := s.do(t, 200, specReq("GET", "/v1/groups/workers", nil))
	if m := specJSON(t, st); len(m["members"].([]any)) != 0 {
		t.Errorf("an empty group: %s", st.Body)
	}
	joined := specJSON(t, s.do(t, 200, specReq("POST", "/v1/groups/workers/join", join(p, "w1"))))
	if joined["member"] != "w1" || joined["lease"] != p || len(joined["members"].([]any)) != 1 {
		t.Errorf("a join: %v", joined)
	}
	s.do(t, 200, specReq("POST", "/v1/groups/workers/join", join(p, "w1"))) // again: the same member
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/groups/workers/join", join(q, "w1"))), "invalid_request")
	if got := s.holdKinds(t, p); len(got) != 1 || got[0] != "group workers w1 held" {
		t.Errorf("the member's lease holds %v", got)
	}
	first := specIndex(t, s.do(t, 200, specReq("GET", "/v1/groups/workers", nil)))
	s.do(t, 200, specReq("POST", "/v1/groups/workers/join", map[string]any{"lease": q}))
	s.readUntil(t, "/v1/groups/workers", first, "two members", func(st map[string]any) bool { return len(st["members"].([]any)) == 2 })
	if l := specJSON(t, s.do(t, 200, specReq("GET", "/v1/groups", nil)))["groups"].([]any); len(l) != 1 {
		t.Errorf("GET /v1/groups: %v", l)
	}
	s.do(t, 204, specReq("POST", "/v1/groups/workers/leave", map[string]any{"lease": p, "member": "w1"}))
	s.do(t, 204, specReq("POST", "/v1/groups/workers/leave", map[string]any{"lease": q}))
	specWantCode(t, s.do(t, 409, specReq("POST", "/v1/groups/workers/leave", map[string]any{"lease": p, "member": "w1"})), "not_held")

	// A lease made by the join itself.
	solo := specJSON(t, s.do(t, 200, specReq("POST", "/v1/groups/solo/join", map[string]any{"ttl": "20s", "holder": "solo"})))
	if solo["member"] != solo["lease"] {
		t.Errorf("a join without a member: %v", solo)
	}
	s.do(t, 204, specReq("DELETE", "/v1/leases/"+solo["lease"].(string), nil))

	// Errors.
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/groups/workers/join", join(p, "a/b"), specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/groups/workers/join", map[string]any{"lease": p, "colour": "red"}, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("GET", "/v1/groups/workers?index=-5", nil, specRejects())), "invalid_request")
	specWantCode(t, s.do(t, 400, specReq("POST", "/v1/groups/workers/leave", map[string]any{"member": "w1"}, specRejects())), "invalid_request")
}
