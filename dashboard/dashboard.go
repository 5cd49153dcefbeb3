// Package dashboard is the gateway's live dashboard: the pages of what
// the root holds in ZooKeeper (locks, semaphores, leases, elections,
// barriers, queues, contention, znodes), read from the recipes' shared
// watch cache and rendered by the components of views, and the /ws stream
// that keeps them live, one hub for every browser. The server makes it from
// a Config and routes to its handlers (Overview, Pages, Static, WS).
package dashboard

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/a-h/templ"
	"github.com/coder/websocket"
	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/zkgate/zkgate/auth"
	"github.com/zkgate/zkgate/recipes"
	"github.com/zkgate/zkgate/static"
	"github.com/zkgate/zkgate/views"
)

const (
	// wsWriteTimeout bounds every write to a dashboard.
	wsWriteTimeout = 10 * time.Second
	// wsPingEvery keeps idle connections (and the proxies between) alive,
	// and finds dead peers.
	wsPingEvery = 20 * time.Second
	// pageReadTimeout bounds the reads behind a page.
	pageReadTimeout = 10 * time.Second
)

// Config is what the dashboard needs of the gateway: a few values and
// callbacks, not the server's own configuration.
type Config struct {
	// Service is the gateway's recipes: its session, the watch cache the
	// pages read and this gateway's leases.
	Service *recipes.Service
	// Contention asks the gateways of the root for their contention
	// figures; nil when this gateway keeps none.
	Contention ContentionReader
	// ZooKeeper is the connect list, whose servers the overview asks for
	// their mode; over TLS with ZooKeeperTLS when it is not nil.
	ZooKeeper    []string
	ZooKeeperTLS *tls.Config
	// Version is the gateway's, shown in the header.
	Version string
	// Log is where the dashboard's failures go (nil: nowhere).
	Log *slog.Logger
	// Metrics registers the dashboard's own metrics (nil: none).
	Metrics prometheus.Registerer
	// Counts reads the gateway's counters the overview's rates come from:
	// the API requests served, and the grants by kind (nil: no rates).
	Counts func() (api float64, grants map[string]float64)
	// HideSessions leaves ZooKeeper session ids out of every page (tokens
	// on: the pages are rendered once for every viewer, and session ids are
	// for admins alone; see recipes.Contender).
	HideSessions bool
	// Revoked watches the token r came with, for as long as ctx lasts:
	// the channel is closed once a reload of the tokens removes or changes
	// it (nil Revoked, or a nil channel: tokens are off).
	Revoked func(ctx context.Context, r *http.Request) <-chan struct{}
	// Actions are what an admin may do from the dashboard (nil: nothing).
	Actions *Actions
	// Problems write the dashboard's errors as the API writes its own.
	Problems Problems
}

// Problems write errors as RFC 9457 problem documents, as the API does
// (handlers.WriteError and handlers.StatusOf): the dashboard answers its
// errors as the API answers them, without any part of the API's transport.
type Problems struct {
	// Write writes err as a problem document.
	Write func(w http.ResponseWriter, r *http.Request, err error)
	// StatusOf is the HTTP status of a problem of code.
	StatusOf func(code recipes.Code) int
}

// ContentionReader asks every gateway of the root for its contention
// figures, as the API does.
type ContentionReader interface {
	Contention(ctx context.Context, window string, limit int, caller *auth.Caller, requestID string) recipes.ContentionReport
	NameContention(ctx context.Context, kind, name, window, requestID string) recipes.NameReport
}

// Dashboard serves the live dashboard: its pages, its static files and the
// /ws stream of updates.
type Dashboard struct {
	svc      *recipes.Service
	source   *dashSource
	log      *slog.Logger
	servers  []string
	gateway  string // the gateway's version
	ensemble *ensemble
	rates    *rateSampler
	hub      *hub
	version  string // of the static files
	revoked  func(ctx context.Context, r *http.Request) <-chan struct{}
	feed     *contentionFeed
	actions  *Actions  // nil: read-only
	done     actionLog // what admins did from it
	problems Problems

	clients  prometheus.Gauge
	nclients atomic.Int64
	dropped  prometheus.Counter
}

// problem writes a problem of code and detail.
func (d *Dashboard) problem(w http.ResponseWriter, r *http.Request, code recipes.Code, detail string) {
	d.problems.Write(w, r, &recipes.Error{Code: code, Detail: detail})
}

// New makes the dashboard of cfg; its hub runs only while dashboards are
// connected.
func New(cfg Config) *Dashboard {
	dash := &Dashboard{
		svc:      cfg.Service,
		source:   newDashSource(cfg.Service, cfg.HideSessions),
		log:      cfg.Log,
		servers:  cfg.ZooKeeper,
		gateway:  cfg.Version,
		ensemble: &ensemble{servers: cfg.ZooKeeper, tls: cfg.ZooKeeperTLS},
		rates:    &rateSampler{counts: cfg.Counts},
		version:  static.Version(),
		revoked:  cfg.Revoked,
		actions:  cfg.Actions,
		problems: cfg.Problems,
		feed:     &contentionFeed{api: cfg.Contention, hideSessions: cfg.HideSessions},
		clients: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "zkgate_dashboard_clients", Help: "Dashboards connected to /ws.",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "zkgate_dashboard_dropped_total", Help: "Dashboards dropped for falling behind (they reconnect and resync).",
		}),
	}
	if dash.log == nil {
		dash.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics != nil {
		for _, c := range []prometheus.Collector{dash.clients, dash.dropped} {
			if err := cfg.Metrics.Register(c); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
				dash.log.Error("register dashboard metric", "err", err)
			}
		}
	}
	dash.hub = newHub(dash)
	return dash
}

var pageTitles = map[string]string{
	"overview": "Overview", kindLocks: "Locks", kindSems: "Semaphores", "leases": "Leases", pageContention: "Contention",
	kindElections: "Elections", kindBarriers: "Barriers", kindQueues: "Queues", "znodes": "Znodes",
	kindGroups:   "Groups",
	kindCounters: "Counters",
}

// Overview serves GET /, the overview page.
func (d *Dashboard) Overview() http.HandlerFunc { return d.page("overview") }

// Pages serves GET /ui/{page}, the dashboard's other pages.
func (d *Dashboard) Pages() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := chi.URLParam(r, "page")
		switch {
		case name == "znodes":
			d.znodes(w, r)
		case name == pageContention:
			d.contention(w, r)
		case name != "overview" && slices.Contains(livePages, name):
			d.page(name)(w, r)
		default:
			d.problem(w, r, recipes.CodeNotFound, "no dashboard page "+strconv.Quote(name))
		}
	}
}

// model builds what the views render from the state and the gateway.
func (d *Dashboard) model(ctx context.Context, st *dashState, clients int) *dashModel {
	state, epoch, id := d.svc.Session().Status()
	dash := d.source.dash
	session := sessionHex(id)
	if d.source.hideSessions {
		session = ""
	}
	m := buildModel(st, modelInputs{
		zk: views.ZKStatus{State: state.String(), SessionID: session, Epoch: epoch, Connect: strings.Join(d.servers, ","),
			Root: dash.Root(), Gateway: dash.GatewayID(), Version: d.gateway},
		servers:  d.ensemble.cached(),
		rates:    d.rates.rates(),
		local:    d.source.leases.List(),
		watched:  d.svc.WatchedPaths(),
		clients:  clients,
		self:     dash.GatewayID(),
		rootPath: dash.Root(),
	})
	m.contention = d.feed.shown
	m.header.Actions = d.done.recent()
	return m
}

func (d *Dashboard) pageOf(name string, m *dashModel, live bool) views.Page {
	return views.Page{Name: name, Title: pageTitles[name], AssetVersion: d.version, Now: time.Now(), Live: live, Header: m.header}
}

// page renders a live page whole: the same components the hub pushes. A
// page of a list shows the items of one page of it (?q= filters the names,
// ?after= is where it starts), and reads only those.
func (d *Dashboard) page(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), pageReadTimeout)
		defer cancel()
		v := viewOf(name, r.URL.Query())
		v.admin = name == "leases" && d.actions != nil && isAdmin(r)
		st := newDashState()
		err := d.source.loadAll(ctx, st, nil, []dashView{v})
		if name == "overview" {
			d.ensemble.get(ctx)
		}
		m := d.model(ctx, st, int(d.nclients.Load()))
		p := d.pageOf(name, m, true)
		p.SignedIn, p.Admin = signedIn(r), v.admin
		if err != nil {
			p.Notice = "Some of ZooKeeper could not be read (" + string(recipes.ErrorCode(err)) + "); the page updates once it can."
		}
		WritePage(w, r, http.StatusOK, pageComponent(p, m, v))
	}
}

// pageComponent is the live page p of v, whole, as the model m shows it.
func pageComponent(p views.Page, m *dashModel, v dashView) templ.Component {
	switch p.Name {
	case "overview":
		return views.OverviewPage(p, m.overview())
	case kindLocks:
		locks, lp := m.locksPage(v)
		return views.LocksPage(p, locks, lp)
	case kindSems:
		sems, lp := m.semsPage(v)
		return views.SemaphoresPage(p, sems, lp)
	case "leases":
		leases, lp := m.leasesPage(v)
		return views.LeasesPage(p, leases, lp)
	case kindElections:
		els, lp := m.electionsPage(v)
		return views.ElectionsPage(p, els, lp)
	case kindBarriers:
		bs, dbs, lp := m.barriersPage(v)
		return views.BarriersPage(p, bs, dbs, lp)
	case kindQueues:
		qs, lp := m.queuesPage(v)
		return views.QueuesPage(p, qs, lp)
	case kindGroups:
		gs, lp := m.groupsPage(v)
		return views.GroupsPage(p, gs, lp)
	case kindCounters:
		cs, lp := m.countersPage(v)
		return views.CountersPage(p, cs, lp)
	}
	return nil
}

// dashboardCSP allows nothing but the gateway's own files and its own
// WebSocket: no inline script or style, no other origin.
const dashboardCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// WriteSignIn writes the sign-in page (see auth.SignIn): its form goes on
// to next, and says failure, why the last try failed, unless "".
func WriteSignIn(w http.ResponseWriter, r *http.Request, status int, next, failure string) {
	WritePage(w, r, status, views.SignInPage(views.SignIn{AssetVersion: static.Version(), Next: next, Error: failure}))
}

// WritePage answers with the page c renders, under the dashboard's
// Content-Security-Policy: the sign-in pages are written by it too.
func WritePage(w http.ResponseWriter, r *http.Request, status int, c templ.Component) {
	var buf bytes.Buffer
	if err := c.Render(r.Context(), &buf); err != nil {
		// A page that does not render is a fault of the build, never of
		// the request: logged, and answered without details.
		slog.ErrorContext(r.Context(), "render a dashboard page", "err", err, "path", r.URL.Path)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", dashboardCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// Static serves GET /ui/static/{file}, the pages' scripts, styles and
// icon: cached for good when asked for with their version.
func (d *Dashboard) Static() http.HandlerFunc {
	fsys := static.FS()
	return func(w http.ResponseWriter, r *http.Request) {
		file := chi.URLParam(r, "file")
		if r.URL.Query().Get("v") == d.version {
			w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		} else {
			w.Header().Set("Cache-Control", "no-cache")
		}
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("ETag", `"`+d.version+`"`)
		http.ServeFileFS(w, r, fsys, path.Clean(file))
	}
}

// WS serves GET /ws?page=NAME (and the page's own ?q= and ?after=): a snapshot
// of the page on connect, then its updates as they happen. The stream is push-only; a client that falls
// behind is dropped and reconnects for a new snapshot. With tokens, a
// stream whose token (bearer or sign-in cookie) is removed or changed by a
// reload of the tokens file is closed with 1008 (policy violation): it
// would otherwise show everything to a token no longer allowed to see it
// for as long as it stays open.
func (d *Dashboard) WS() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		page := r.URL.Query().Get("page")
		if !slices.Contains(livePages, page) {
			d.problem(w, r, recipes.CodeInvalid, "page must be one of "+strings.Join(livePages, ", "))
			return
		}
		view := viewOf(page, r.URL.Query())
		view.admin = page == "leases" && d.actions != nil && isAdmin(r)
		if page == pageContention {
			// A view of its own: its window, and the name chosen.
			cv, err := contentionViewOf(r.URL.Query())
			if err != nil {
				d.problems.Write(w, r, err)
				return
			}
			view = dashView{page: page, contention: cv}
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		var revoked <-chan struct{} // nil without tokens: never
		if d.revoked != nil {
			revoked = d.revoked(ctx, r) // before the upgrade: no reload is missed
		}
		// Same host only (the default of Accept): another site's page can
		// not read the dashboard through a visitor's browser.
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{})
		if err != nil {
			return // Accept has answered (403 for a foreign Origin)
		}
		defer c.CloseNow()
		ctx = c.CloseRead(ctx)
		sub, err := d.hub.subscribe(ctx, view)
		if err != nil {
			_ = c.Close(websocket.StatusTryAgainLater, "the gateway is shutting down")
			return
		}
		defer d.hub.unsubscribe(sub)
		ping := time.NewTicker(wsPingEvery)
		defer ping.Stop()
		for {
			select {
			case <-revoked:
				_ = c.Close(websocket.StatusPolicyViolation, "the token was removed or changed")
				return
			case msg := <-sub.ch:
				wctx, cancel := context.WithTimeout(sub.ctx, wsWriteTimeout)
				err := c.Write(wctx, websocket.MessageText, msg)
				cancel()
				if err != nil {
					return
				}
			case <-ping.C:
				pctx, cancel := context.WithTimeout(sub.ctx, wsWriteTimeout)
				err := c.Ping(pctx)
				cancel()
				if err != nil {
					return
				}
			case <-sub.ctx.Done():
				return
			}
		}
	}
}

// The znode browser reads on demand, with no watch: it is not live.
const (
	znodeTextMax  = 256 << 10 // bytes of data shown as text or JSON
	znodeHexMax   = 16 << 10  // bytes shown as a hex dump
	znodePageSize = 200       // children per page
)

func (d *Dashboard) znodes(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), pageReadTimeout)
	defer cancel()
	dash := d.source.dash
	p := r.URL.Query().Get("path")
	if p == "" {
		p = dash.Root()
	}
	z := views.Znode{Root: dash.Root(), PageSize: znodePageSize}
	z.Path = p
	node, err := dash.Znode(ctx, p)
	status := http.StatusOK
	if err != nil {
		z.Err = "Cannot show " + p + ": " + errDetail(err)
		status = d.problems.StatusOf(recipes.ErrorCode(err))
	} else {
		z.DashboardZnode = node
		z.View, z.Views, z.Shown, z.Cut = showData(node.Data, r.URL.Query().Get("view"))
		z.Pages = max((len(node.Children)+znodePageSize-1)/znodePageSize, 1)
		z.Page, _ = strconv.Atoi(r.URL.Query().Get("page"))
		z.Page = min(max(z.Page, 0), z.Pages-1)
	}
	// The header's counts, as on every page.
	all := newDashState()
	_ = d.source.loadAll(ctx, all, nil, nil)
	page := d.pageOf("znodes", d.model(ctx, all, int(d.nclients.Load())), false)
	page.SignedIn = signedIn(r)
	WritePage(w, r, status, views.ZnodesPage(page, z))
}

func errDetail(err error) string {
	var e *recipes.Error
	if errors.As(err, &e) && e.Code != recipes.CodeInternal {
		return e.Detail
	}
	return "internal error"
}

// showData picks how to show a znode's data: pretty JSON if it is JSON,
// text if it is text, else a hex dump; want picks another possible view.
func showData(b []byte, want string) (view string, possible []string, shown string, cut int) {
	textual := utf8.Valid(b) && !slices.ContainsFunc([]rune(string(b[:min(len(b), znodeTextMax)])), func(r rune) bool {
		return r < 0x20 && r != '\n' && r != '\r' && r != '\t' || r == 0x7f
	})
	isJSON := len(b) <= znodeTextMax && json.Valid(b)
	if isJSON {
		possible = append(possible, "json")
	}
	if textual {
		possible = append(possible, "text")
	}
	possible = append(possible, "hex")
	view = possible[0]
	if slices.Contains(possible, want) {
		view = want
	}
	switch view {
	case "json":
		var out bytes.Buffer
		if json.Indent(&out, b, "", "  ") == nil {
			return view, possible, out.String(), 0
		}
		return view, possible, string(b), 0
	case "text":
		n := min(len(b), znodeTextMax)
		for n > 0 && n < len(b) && !utf8.RuneStart(b[n]) {
			n--
		}
		return view, possible, string(b[:n]), len(b) - n
	}
	n := min(len(b), znodeHexMax)
	return view, possible, hex.Dump(b[:n]), len(b) - n
}

// signedIn is the name of the token a dashboard page is shown to.
func signedIn(r *http.Request) string {
	if c := auth.CallerOf(r.Context()); c != nil {
		return c.Name
	}
	return ""
}

func sessionHex(id int64) string { return fmt.Sprintf("0x%x", uint64(id)) }

// setClients records how many dashboards are connected.
func (d *Dashboard) setClients(n int) {
	d.nclients.Store(int64(n))
	d.clients.Set(float64(n))
}
