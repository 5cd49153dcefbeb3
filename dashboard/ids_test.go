package dashboard

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/zkgate/zkgate/recipes"
	"github.com/zkgate/zkgate/views"
)

// TestFragmentsAreElementsOfThePage: every fragment the hub pushes for a
// live page (each single, each list and each item, and the header's) is
// an element of the page rendered whole, by the same id: a fragment whose
// id the page does not carry would change nothing in a browser.
func TestFragmentsAreElementsOfThePage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	since := time.Now().Add(-time.Minute)
	holder := recipes.Contender{Node: "n-0000000001", Lease: "l1", Holder: "worker", Since: since}
	st := newDashState()
	st.locks["db"] = recipes.LockState{Name: "db", Holders: []recipes.Contender{holder}}
	st.sems["pool"] = recipes.SemaphoreState{Name: "pool", Limit: 2, Holders: []recipes.Contender{holder}}
	st.elections["leader"] = recipes.ElectionState{Name: "leader", Leader: &holder, Candidates: []recipes.Contender{holder}}
	st.dbarriers["phase"] = recipes.DoubleBarrierState{Name: "phase", Count: 2}
	st.queues["jobs"] = dashQueue{QueueState: recipes.QueueState{Name: "jobs", Length: 1}}
	st.groups["web"] = recipes.GroupState{Name: "web", Members: []recipes.GroupMember{{Member: "w1", Node: "w1__party__", Lease: "l1", Holder: "worker", Since: since}}}
	st.barriers = []recipes.BarrierState{{Name: "deploy", Raised: true, Since: &since}}
	st.counters["hits"] = views.Counter{Name: "hits", Values: map[recipes.CounterFormat]int64{recipes.FormatDecimal: 42}, Bytes: 2}
	st.leases = []recipes.LeaseInfo{{LeaseTerms: recipes.LeaseTerms{ID: "l1", Holder: "worker", TTL: recipes.Duration(time.Minute), CreatedAt: since}, Gateway: "gw"}}
	for _, kind := range allKinds {
		st.whole[kind] = true
	}
	m := buildModel(st, modelInputs{zk: views.ZKStatus{State: "live"}, self: "gw", rootPath: "/zkgate"})
	chosen := views.Contention{Window: "1m", Now: time.Now(), Names: []recipes.NameStats{}, Deadlocks: []recipes.DeadlockRecord{}}
	m.contention = func(contentionView) (views.Contention, bool) { return chosen, true }

	for _, page := range livePages {
		v := dashView{page: page}
		p := views.Page{Name: page, Title: pageTitles[page], Live: true, Header: m.header}
		c := pageComponent(p, m, v)
		if page == pageContention {
			v.contention = contentionView{window: "1m"}
			c = views.ContentionPage(p, chosen)
		}
		html := renderHTML(ctx, c)
		var ids []string
		for _, topic := range []topicView{renderTopic(ctx, dashView{page: topicHeader}, m, nil), renderTopic(ctx, v, m, nil)} {
			for _, s := range topic.singles {
				ids = append(ids, s.id)
			}
			for _, l := range topic.lists {
				if len(l.items) == 0 {
					t.Errorf("page %s: the list %s has no item to check", page, l.id)
				}
				ids = append(ids, l.id)
				for _, it := range l.items {
					ids = append(ids, it.id)
				}
			}
		}
		if len(ids) < 2 {
			t.Errorf("page %s: fragments %q, want the header's and the page's", page, ids)
		}
		for _, id := range ids {
			if !strings.Contains(html, ` id="`+id+`"`) {
				t.Errorf("page %s: the hub pushes the fragment %q, which the page has no element of", page, id)
			}
		}
	}
}
