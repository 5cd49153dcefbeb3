package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/zkgate/zkgate/auth"
	"github.com/zkgate/zkgate/recipes"
	"github.com/zkgate/zkgate/views"
)

// Actions are the API's own handlers that the dashboard's forms act
// through: a revoke from the dashboard is DELETE /v1/leases/{id}, a release
// the release route of the hold's kind, served by the same handler as the
// API's, forwarding to the gateway that keeps the lease included. The
// dashboard adds the confirmation, the form's token and the record.
type Actions struct {
	// Revoke is DELETE /v1/leases/{id}.
	Revoke http.Handler
	// Release are the routes that end one hold of a lease, by the hold's
	// kind: lock, semaphore, election (resign) and claim (nack); see
	// holdRoutes.
	Release map[string]http.Handler
	// Audit receives a record of every action.
	Audit *slog.Logger
}

// holdRoute is the API route that ends one kind of hold.
type holdRoute struct {
	kind    string // of the permission, and of the route
	pattern string
	path    func(name, item string) string
}

var holdRoutes = map[string]holdRoute{
	"lock": {kindLocks, "/v1/locks/{name}/release", func(n, _ string) string { return "/v1/locks/" + n + "/release" }},
	"semaphore": {kindSems, "/v1/semaphores/{name}/release",
		func(n, _ string) string { return "/v1/semaphores/" + n + "/release" }},
	"election": {kindElections, "/v1/elections/{name}/resign", func(n, _ string) string { return "/v1/elections/" + n + "/resign" }},
	"claim": {kindQueues, "/v1/queues/{name}/items/{id}/nack",
		func(n, item string) string { return "/v1/queues/" + n + "/items/" + item + "/nack" }},
}

// maxActions is how many actions the pages show.
const maxActions = 8

// actionLog is what admins did from this gateway's dashboard lately.
type actionLog struct {
	mu   sync.Mutex
	list []views.Action // newest first
}

func (a *actionLog) add(x views.Action) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.list = append([]views.Action{x}, a.list[:min(len(a.list), maxActions-1)]...)
}

func (a *actionLog) recent() []views.Action {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]views.Action(nil), a.list...)
}

// isAdmin says whether the dashboard shows r's viewer the controls of an
// admin: with tokens on, a token with admin on leases. Each action checks
// the lease and the name it acts on again.
func isAdmin(r *http.Request) bool {
	c := auth.CallerOf(r.Context())
	return c != nil && c.MaySome("leases", auth.LevelAdmin)
}

// formBodyLimit caps a dashboard form.
const formBodyLimit = 8 << 10

// ConfirmRevoke serves GET /ui/leases/{id}/revoke: what the revoke ends,
// and the form that confirms it.
func (d *Dashboard) ConfirmRevoke() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { d.confirm(w, r, false) }
}

// ConfirmRelease serves GET /ui/leases/{id}/release?kind=&name=[&mode=][&item=]:
// the one hold the release ends, and the form that confirms it.
func (d *Dashboard) ConfirmRelease() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { d.confirm(w, r, true) }
}

func (d *Dashboard) confirm(w http.ResponseWriter, r *http.Request, release bool) {
	if err := d.mayAct(r); err != nil {
		d.problems.Write(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), pageReadTimeout)
	defer cancel()
	id := chi.URLParam(r, "id")
	v := dashView{page: "leases", q: id}
	st := newDashState()
	_ = d.source.loadAll(ctx, st, nil, []dashView{v})
	m := d.model(ctx, st, int(d.nclients.Load()))
	p := d.pageOf("leases", m, false)
	p.Title, p.SignedIn, p.Admin = "Confirm", signedIn(r), true
	c := views.Confirm{Lease: views.Lease{ID: id}, FormField: auth.FormTokenField(), Action: r.URL.Path}
	status := http.StatusOK
	found := false
	for _, l := range m.leases {
		if l.ID == id {
			c.Lease, found = l, true
		}
	}
	switch {
	case !found:
		c.Error, status = "No live lease has the id "+strconv.Quote(id)+": it has ended, or never was.", http.StatusNotFound
	case release:
		q := r.URL.Query()
		h, ok := holdOf(c.Lease, q.Get("kind"), q.Get("name"), q.Get("mode"), q.Get("item"))
		kind := holdRoutes[h.Kind].kind
		switch caller := auth.CallerOf(r.Context()); {
		case !ok:
			c.Error, status = "The lease does not hold that (any more): see the leases page.", http.StatusNotFound
		case !caller.May(kind, h.Name, auth.LevelAdmin):
			c.Error, status = "Your token "+caller.Name+" may not release it: that needs "+kind+":"+h.Name+":admin.", http.StatusForbidden
		default:
			c.Hold = &h
		}
	}
	if c.Error == "" {
		if c.FormToken = auth.FormToken(w, r); c.FormToken == "" {
			c.Error, status = "Sign in to the dashboard with your token to act from it (a bearer token has the API instead).", http.StatusForbidden
		}
	}
	WritePage(w, r, status, views.ConfirmPage(p, c))
}

// holdOf finds the hold of lease l that a form names, if the dashboard can
// release it.
func holdOf(l views.Lease, kind, name, mode, item string) (recipes.HoldInfo, bool) {
	for _, h := range l.Holds {
		if h.Kind == kind && h.Name == name && (mode == "" || h.Mode == mode) && h.Item == item && views.ReleasableHold(h) {
			return h, true
		}
	}
	return recipes.HoldInfo{}, false
}

// mayAct refuses an action without tokens (the dashboard has no admins
// then: the API is open to all) or of a gateway wired without actions.
func (d *Dashboard) mayAct(r *http.Request) error {
	if d.actions == nil || auth.CallerOf(r.Context()) == nil {
		return &recipes.Error{Code: auth.CodeForbidden,
			Detail: "the dashboard acts only for a signed-in token with admin (tokens on, --auth-file): use the API, DELETE /v1/leases/{id}"}
	}
	return nil
}

// Revoke serves POST /ui/leases/{id}/revoke, a confirmed revoke: the
// API's DELETE /v1/leases/{id}, as the admin.
func (d *Dashboard) Revoke() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, ok := d.checkForm(w, r)
		if !ok {
			return
		}
		holder := d.holderOf(r.Context(), id)
		status := d.act(w, r, d.actions.Revoke, "leases", id, http.MethodDelete, "/v1/leases/{id}", "/v1/leases/"+id,
			map[string]string{"id": id}, nil)
		what := views.LeaseWords(id, holder) + " revoked"
		d.record(r, status, "dashboard_revoke", what, slog.String("lease", id), slog.String("holder", holder))
	}
}

// Release serves POST /ui/leases/{id}/release, a confirmed release of one
// hold (the form's kind, name, mode and item): the API's release of that
// kind, as the admin, who must hold admin on the name too.
func (d *Dashboard) Release() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, ok := d.checkForm(w, r)
		if !ok {
			return
		}
		f := r.PostForm
		kind, name, mode, item := f.Get("kind"), f.Get("name"), f.Get("mode"), f.Get("item")
		route, known := holdRoutes[kind]
		h := d.actions.Release[kind]
		if !known || h == nil {
			d.problem(w, r, recipes.CodeInvalid, "kind must be one of lock, semaphore, election, claim")
			return
		}
		if err := recipes.ValidName(name); err != nil {
			d.problems.Write(w, r, err)
			return
		}
		if c := auth.CallerOf(r.Context()); !c.May(route.kind, name, auth.LevelAdmin) {
			d.problems.Write(w, r, auth.Forbidden("token %q lacks the permission %s:%s:admin, which releasing another's hold of it needs",
				c.Name, route.kind, name))
			return
		}
		body := map[string]string{"lease": id}
		if kind == "lock" && mode != "" {
			body["mode"] = mode
		}
		holder := d.holderOf(r.Context(), id)
		status := d.act(w, r, h, route.kind, name, http.MethodPost, route.pattern, route.path(url.PathEscape(name), url.PathEscape(item)),
			map[string]string{"name": name, "id": item}, body)
		hold := recipes.HoldInfo{Kind: kind, Name: name, Mode: mode, Item: item}
		what := views.HoldLine(hold) + " of " + views.LeaseWords(id, holder) + " released"
		d.record(r, status, "dashboard_release", what, slog.String("lease", id), slog.String("holder", holder),
			slog.String("kind", kind), slog.String("name", name), slog.String("item", item))
	}
}

// checkForm reads a posted form of the dashboard and checks it: tokens
// on, the lease id, and the form's token of the sign-in session.
func (d *Dashboard) checkForm(w http.ResponseWriter, r *http.Request) (string, bool) {
	if err := d.mayAct(r); err != nil {
		d.problems.Write(w, r, err)
		return "", false
	}
	r.Body = http.MaxBytesReader(w, r.Body, formBodyLimit)
	if err := r.ParseForm(); err != nil {
		d.problem(w, r, recipes.CodeInvalid, "the form could not be read")
		return "", false
	}
	if err := auth.CheckForm(r, r.PostForm.Get(auth.FormTokenField())); err != nil {
		d.problems.Write(w, r, err)
		return "", false
	}
	id := chi.URLParam(r, "id")
	if !views.LeaseIDForm(id) {
		d.problem(w, r, recipes.CodeInvalid, "a lease id is a lower-case UUID such as 0b5c6f7e-1a2b-4c3d-8e9f-001122334455")
		return "", false
	}
	return id, true
}

// holderOf is the holder label of lease id as this gateway knows it ("":
// not known here).
func (d *Dashboard) holderOf(ctx context.Context, id string) string {
	for _, l := range d.source.leases.List() {
		if l.ID == id {
			return l.Holder
		}
	}
	st := newDashState()
	rctx, cancel := context.WithTimeout(ctx, pageReadTimeout)
	defer cancel()
	_ = d.source.loadAll(rctx, st, nil, []dashView{{page: "leases", q: id}})
	for _, l := range st.leases {
		if l.ID == id {
			return l.Holder
		}
	}
	return ""
}

// act serves the form's request r as the API's request method path (of
// the route pattern, with its URL params and JSON body) through h, the
// API's own handler of that route, for the same caller acting on kind and
// target. Success is 303 to the leases page; a refusal is the API's
// problem, as it is. It returns the API's status.
func (d *Dashboard) act(w http.ResponseWriter, r *http.Request, h http.Handler, kind, target, method, pattern, path string,
	params map[string]string, body any) int {
	c := *auth.CallerOf(r.Context())
	c.Kind, c.Target, c.Route, c.Granted = kind, target, method+" "+pattern, c.May(kind, target, auth.LevelWrite)
	rctx := chi.NewRouteContext()
	for k, v := range params {
		rctx.URLParams.Add(k, v)
	}
	ctx := context.WithValue(auth.WithCaller(r.Context(), &c), chi.RouteCtxKey, rctx)
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body) // strings: it cannot fail
	}
	req, err := http.NewRequestWithContext(ctx, method, path, bytes.NewReader(b))
	if err != nil {
		d.problem(w, r, recipes.CodeInvalid, "no such route: "+path)
		return http.StatusBadRequest
	}
	req.RemoteAddr, req.Host = r.RemoteAddr, r.Host
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("X-Request-Id", w.Header().Get("X-Request-Id"))
	answer := &heldAnswer{header: http.Header{"X-Request-Id": {w.Header().Get("X-Request-Id")}}} // the problem's instance
	h.ServeHTTP(answer, req)
	if answer.status == 0 {
		answer.status = http.StatusOK
	}
	if answer.status < 300 {
		http.Redirect(w, r, "/ui/leases", http.StatusSeeOther)
		return answer.status
	}
	for _, k := range []string{"Content-Type", "Retry-After"} {
		if v := answer.header.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
	w.WriteHeader(answer.status)
	_, _ = w.Write(answer.body.Bytes())
	return answer.status
}

// heldAnswer keeps the answer of the API's handler for act.
type heldAnswer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (a *heldAnswer) Header() http.Header { return a.header }
func (a *heldAnswer) WriteHeader(status int) {
	if a.status == 0 {
		a.status = status
	}
}
func (a *heldAnswer) Write(b []byte) (int, error) {
	a.WriteHeader(http.StatusOK)
	return a.body.Write(b)
}

// record writes an action to the audit log (who, what, when, from where,
// and how it ended), and, done, shows it on every page of this gateway's
// dashboard.
func (d *Dashboard) record(r *http.Request, status int, audit, what string, attrs ...slog.Attr) {
	c := auth.CallerOf(r.Context())
	log := d.actions.Audit
	if log == nil {
		log = d.log
	}
	attrs = append([]slog.Attr{slog.String("audit", audit), slog.String("actor", c.Name), slog.String("remote", r.RemoteAddr),
		slog.Int("status", status), slog.String("request_id", c.RequestID)}, attrs...)
	log.LogAttrs(r.Context(), slog.LevelInfo, "audit: "+what+" from the dashboard by "+c.Name, attrs...)
	if status >= 300 {
		return
	}
	d.done.add(views.Action{At: time.Now(), What: what, By: c.Name})
	d.hub.markDirty("") // every page shows it
}
