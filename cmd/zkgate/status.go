package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/zkgate/zkgate/client"
)

// statusLimit is how many of each kind the table shows by default: the
// first, by name (the leases: the oldest).
const statusLimit = 50

// status is what `zkgate status --json` prints.
type status struct {
	Gateway        string                      `json:"gateway"`
	Locks          []client.LockState          `json:"locks"`
	Semaphores     []client.SemaphoreState     `json:"semaphores"`
	Elections      []client.ElectionState      `json:"elections"`
	Barriers       []client.BarrierState       `json:"barriers"`
	DoubleBarriers []client.DoubleBarrierState `json:"double_barriers"`
	Queues         []client.QueueState         `json:"queues"`
	Groups         []client.GroupState         `json:"groups"`
	Leases         []client.LeaseInfo          `json:"leases"`

	// more names the kinds that have more than the table shows.
	more []string
}

// newStatusCommand is `zkgate status`: who holds, waits for and leads what.
func newStatusCommand(a *app) *cobra.Command {
	var gw gatewayFlags
	var asJSON bool
	var limit int
	cmd := &cobra.Command{
		Use:   "status [--limit 50] [--json]",
		Short: "who holds, waits for and leads what (--json: all, for scripts)",
		Long: `Shows who holds, waits for and leads what at the gateway, as a table: the first
--limit of each kind, by name (the leases: the oldest). Then the leases: each
one's TTL (it ends that long after its last keepalive), when it was last renewed,
and the deadline its gateway has confirmed ("confirmed until": what the gateway's
ZooKeeper session is known to keep, moved on by every keepalive and heartbeat,
so often a session timeout ahead however long the TTL). Names, holder labels and
values are shown with control characters escaped as Go's %q does; --json gives
every item of every page of the gateway's lists, as they are.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 0 {
				return usageErr("--limit must be 0 (every one) or more")
			}
			c, err := gw.client()
			if err != nil {
				return err
			}
			if asJSON {
				limit = 0
			}
			st, err := readStatus(cmd.Context(), c, limit)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(a.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			return printStatus(a.stdout, st, time.Now())
		},
	}
	gw.register(cmd, a)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts instead of a table: every item of every page of the gateway's lists")
	cmd.Flags().IntVar(&limit, "limit", statusLimit, "the table shows at most this many of each kind, the first by name (0: every one)")
	return cmd
}

// readStatus gathers the state of the primitives in use, from the gateway's
// lists: with limit > 0 the first limit of each kind (each read whole: one
// request each), noting in st.more the kinds that have more.
func readStatus(ctx context.Context, c *client.Client, limit int) (*status, error) {
	st := &status{Gateway: c.URL(), Locks: []client.LockState{}, Semaphores: []client.SemaphoreState{},
		Elections: []client.ElectionState{}}
	// One more than the table shows tells whether there is more.
	opt := client.Limit(0)
	if limit > 0 {
		opt = client.Limit(limit + 1)
	}
	cut := func(kind string, n int) int {
		if limit > 0 && n > limit {
			st.more = append(st.more, kind)
			return limit
		}
		return n
	}
	var err error
	if st.Leases, err = c.Leases(ctx, opt); err != nil {
		return nil, fmt.Errorf("leases: %w", err)
	}
	st.Leases = st.Leases[:cut("leases", len(st.Leases))]
	if st.Locks, err = appendStates(ctx, st.Locks, "lock", "locks", cut,
		func() ([]client.LockSummary, error) { return c.Locks(ctx, "", opt) },
		func(l client.LockSummary) string { return l.Name }, c.LockState); err != nil {
		return nil, err
	}
	if st.Semaphores, err = appendStates(ctx, st.Semaphores, "semaphore", "semaphores", cut,
		func() ([]client.SemaphoreSummary, error) { return c.Semaphores(ctx, opt) },
		func(s client.SemaphoreSummary) string { return s.Name }, c.SemaphoreState); err != nil {
		return nil, err
	}
	if st.Elections, err = appendStates(ctx, st.Elections, "election", "elections", cut,
		func() ([]client.ElectionSummary, error) { return c.Elections(ctx, opt) },
		func(e client.ElectionSummary) string { return e.Name }, c.ElectionState); err != nil {
		return nil, err
	}
	if st.Barriers, err = c.Barriers(ctx, opt); err != nil {
		return nil, fmt.Errorf("barriers: %w", err)
	}
	st.Barriers = st.Barriers[:cut("barriers", len(st.Barriers))]
	if st.DoubleBarriers, err = c.DoubleBarriers(ctx, opt); err != nil {
		return nil, fmt.Errorf("double barriers: %w", err)
	}
	st.DoubleBarriers = st.DoubleBarriers[:cut("double barriers", len(st.DoubleBarriers))]
	if st.Queues, err = c.Queues(ctx, opt); err != nil {
		return nil, fmt.Errorf("queues: %w", err)
	}
	st.Queues = st.Queues[:cut("queues", len(st.Queues))]
	if st.Groups, err = c.Groups(ctx, opt); err != nil {
		return nil, fmt.Errorf("groups: %w", err)
	}
	st.Groups = st.Groups[:cut("groups", len(st.Groups))]
	return st, nil
}

// appendStates lists the primitives of kind (kinds in the plural), cut to
// the table's limit, and appends to states the state of each, read whole:
// one request each.
func appendStates[T, S any](ctx context.Context, states []S, kind, kinds string, cut func(string, int) int,
	list func() ([]T, error), name func(T) string, state func(context.Context, string) (S, error)) ([]S, error) {
	all, err := list()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", kinds, err)
	}
	for _, x := range all[:cut(kinds, len(all))] {
		s, err := state(ctx, name(x))
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", kind, name(x), err)
		}
		states = append(states, s)
	}
	return states, nil
}

// printStatus writes the table people read.
func printStatus(w io.Writer, st *status, now time.Time) error {
	t := &statusTable{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0), now: now}
	fmt.Fprintln(t.tw, "KIND\tNAME\tROLE\tHOLDER\tLEASE\tTOKEN\tFOR")
	t.holds(st)
	t.gatherings(st)
	if t.rows == 0 && len(st.more) == 0 {
		fmt.Fprintf(w, "nothing is held, waited for or led at %s\n", st.Gateway)
		if len(st.Leases) == 0 {
			return nil
		}
	} else if err := t.tw.Flush(); err != nil {
		return err
	}
	if err := printLeases(w, st.Leases, now); err != nil {
		return err
	}
	if len(st.more) > 0 {
		fmt.Fprintf(w, "more %s than shown: --limit N shows more, --limit 0 or --json all\n", strings.Join(st.more, ", "))
	}
	leases := strconv.Itoa(len(st.Leases))
	if slices.Contains(st.more, "leases") {
		leases = "more than " + leases
	}
	fmt.Fprintf(w, "%s leases live at %s\n", leases, st.Gateway)
	return nil
}

// printLeases writes the table of leases: each one's TTL, when it was
// last kept alive, and the deadline its gateway confirmed, labelled as
// such. That deadline is what the gateway's ZooKeeper session is known to
// keep, often a session timeout ahead however long the TTL: shown as a
// countdown, a healthy lease read as one about to end.
func printLeases(w io.Writer, leases []client.LeaseInfo, now time.Time) error {
	if len(leases) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LEASE\tHOLDER\tTTL\tRENEWED\tCONFIRMED UNTIL\tHOLDS")
	for _, l := range leases {
		renewed := ""
		if !l.RenewedAt.IsZero() {
			renewed = max(now.Sub(l.RenewedAt), 0).Round(time.Second).String() + " ago"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", short(l.ID), cell(l.Holder), l.TTL, renewed,
			l.ExpiresAt.UTC().Format("15:04:05 UTC"), len(l.Holds))
	}
	return tw.Flush()
}

// statusTable is the table printStatus writes, counting its rows; ages are
// counted to now.
type statusTable struct {
	tw   *tabwriter.Writer
	now  time.Time
	rows int
}

// row writes one row; a zero token or since leaves its cell empty.
func (t *statusTable) row(kind, name, role, holder, lease string, token int64, since time.Time) {
	t.rows++
	tok := ""
	if token > 0 {
		tok = strconv.FormatInt(token, 10)
	}
	age := ""
	if !since.IsZero() {
		age = t.now.Sub(since).Round(time.Second).String()
	}
	fmt.Fprintf(t.tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", kind, cell(name), role, cell(holder), cell(short(lease)), tok, age)
}

// contender writes the row of a holder, waiter or candidate h.
func (t *statusTable) contender(kind, name, role string, h client.Holder) {
	who := h.Holder
	if h.Value != "" {
		who = h.Value + " (" + h.Holder + ")"
	}
	if h.Foreign {
		who += " [foreign]"
	}
	if h.Mode != "" && kind == "lock" {
		role += " " + h.Mode
	}
	t.row(kind, name, role, who, h.Lease, h.Token, h.Since)
}

// line writes the holders of name, then its waiters in their order.
func (t *statusTable) line(kind, name string, holders, waiters []client.Holder) {
	for _, h := range holders {
		t.contender(kind, name, "holds", h)
	}
	for i, h := range waiters {
		t.contender(kind, name, fmt.Sprintf("waits #%d", i+1), h)
	}
}

// holds writes the locks, semaphores and elections of st.
func (t *statusTable) holds(st *status) {
	for _, l := range st.Locks {
		t.line("lock", l.Name, l.Holders, l.Waiters)
	}
	for _, s := range st.Semaphores {
		name := s.Name
		if s.Limit > 0 {
			name = fmt.Sprintf("%s (%d/%d)", s.Name, len(s.Holders), s.Limit)
		}
		t.line("semaphore", name, s.Holders, s.Waiters)
	}
	for _, e := range st.Elections {
		for i, h := range e.Candidates {
			role := "leads"
			if i > 0 {
				role = fmt.Sprintf("candidate #%d", i)
			}
			t.contender("election", e.Name, role, h)
		}
	}
}

// gatherings writes the barriers, double barriers and queues with items of
// st.
func (t *statusTable) gatherings(st *status) {
	for _, b := range st.Barriers {
		var since time.Time
		if b.Since != nil {
			since = *b.Since
		}
		t.row("barrier", b.Name, "raised", "", "", 0, since)
	}
	for _, d := range st.DoubleBarriers {
		role := "member"
		if d.Ready {
			role = "member (ready)"
		}
		for _, m := range d.Members {
			t.row("double-barrier", d.Name, role, m.Member+" ("+m.Holder+")", m.Lease, 0, m.Since)
		}
	}
	for _, g := range st.Groups {
		for _, m := range g.Members {
			who := m.Member
			if m.Holder != "" {
				who += " (" + m.Holder + ")"
			}
			t.row("group", g.Name, "member", who, m.Lease, 0, m.Since)
		}
	}
	for _, q := range st.Queues {
		if q.Length == 0 {
			continue
		}
		t.row("queue", q.Name, fmt.Sprintf("%d items, %d claimed", q.Length, q.Claimed), "", "", 0, time.Time{})
	}
}

// short is the first block of a lease id: enough to tell leases apart.
func short(id string) string {
	if i := strings.IndexByte(id, '-'); i > 0 {
		return id[:i]
	}
	return id
}

// cell keeps a table cell on one line, of a readable width, and inert:
// names, holder labels, values and foreign nodes' data come from clients.
func cell(s string) string {
	s = oneLine(s)
	if len(s) > 48 {
		s = strings.ToValidUTF8(s[:47], "") + "…"
	}
	return printable(s)
}

// printable escapes what a terminal would act on rather than show (control
// characters such as ESC and BEL, format characters such as bidi
// overrides, invalid UTF-8) as Go's %q does (\x1b, \a, \u202e), so that a
// holder label cannot retitle, clear or rewrite the terminal it is shown
// in.
func printable(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return r == utf8.RuneError || !unicode.IsPrint(r) })
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.WriteString(s[:i])
	for len(s[i:]) > 0 {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unicode.IsPrint(r):
			b.WriteString(s[i : i+n])
		default:
			q := strconv.QuoteRune(r) // '\x1b'
			b.WriteString(q[1 : len(q)-1])
		}
		i += n
	}
	return b.String()
}
