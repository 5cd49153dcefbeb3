package auth

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/zkgate/zkgate/recipes"
)

// sessionMaxAge is how long a browser keeps a dashboard sign-in.
const sessionMaxAge = 12 * time.Hour

// SignIn is the dashboard's sign-in: GET /signin (the page), POST /signin
// (takes the token once and keeps it in an HttpOnly, SameSite=Strict
// cookie) and POST /signout (forgets it). The front door refuses either
// posted from another site.
type SignIn struct {
	Store *Store
	// WritePage writes the sign-in page with status: the form, which goes
	// on to next once signed in, and failure, why the last try failed
	// ("" for none). The page is the dashboard's to draw.
	WritePage func(w http.ResponseWriter, r *http.Request, status int, next, failure string)
	// WriteError writes a problem.
	WriteError func(w http.ResponseWriter, r *http.Request, err error)
}

// whenEnabled serves h while tokens are on; without tokens there is no
// sign-in, and the dashboard is open to all.
func (s SignIn) whenEnabled(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.Store.Enabled() {
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
		h(w, r)
	}
}

// Page answers GET /signin.
func (s SignIn) Page() http.HandlerFunc {
	return s.whenEnabled(func(w http.ResponseWriter, r *http.Request) {
		s.WritePage(w, r, http.StatusOK, localPath(r.URL.Query().Get("next")), "")
	})
}

// Post answers POST /signin.
func (s SignIn) Post() http.HandlerFunc {
	return s.whenEnabled(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
		if err := r.ParseForm(); err != nil {
			s.WriteError(w, r, &recipes.Error{Code: recipes.CodeInvalid, Detail: "the sign-in form could not be read"})
			return
		}
		next := localPath(r.PostForm.Get("next"))
		secret := strings.TrimSpace(r.PostForm.Get("token"))
		tok := s.Store.Tokens().Authenticate(secret)
		switch {
		case tok == nil:
			w.Header().Set("WWW-Authenticate", `Bearer realm="zkgate", error="invalid_token"`)
			s.WritePage(w, r, http.StatusUnauthorized, next, "Unknown token.")
			return
		case !tok.Permits("*", "*", LevelRead):
			s.WritePage(w, r, http.StatusForbidden, next, "Token "+tok.Name+" may not read the dashboard: it needs *:*:read.")
			return
		}
		http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: secret, Path: "/", MaxAge: int(sessionMaxAge / time.Second),
			HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
		setFormCookie(w, r)
		http.Redirect(w, r, next, http.StatusSeeOther)
	})
}

// Out answers POST /signout.
func (s SignIn) Out() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		clearSessionCookie(w, r)
		clearFormCookie(w, r)
		http.Redirect(w, r, "/signin", http.StatusSeeOther)
	}
}

func clearSessionCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
}

// localPath keeps next only if it is a path of this gateway (never
// "//host" or "https://host": no open redirect).
func localPath(next string) string {
	if next == "" || next[0] != '/' || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") || strings.ContainsAny(next, "\r\n") {
		return "/"
	}
	if u, err := url.Parse(next); err != nil || u.Host != "" || u.Scheme != "" {
		return "/"
	}
	return next
}
