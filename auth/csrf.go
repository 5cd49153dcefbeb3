package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"time"
)

// FormCookie keeps the nonce of a dashboard sign-in session, from which
// the token of its forms is made (see FormToken).
const FormCookie = "zkgate_form"

// formTokenField is the field of a dashboard form that carries its token.
const formTokenField = "form_token"

// FormTokenField names the field of a dashboard form that carries the
// token of its sign-in session.
func FormTokenField() string { return formTokenField }

// The token of a dashboard form (a confirmed revoke, a release) is bound to
// the sign-in session that showed it: HMAC-SHA256, keyed by the session's
// secret (its token), of the nonce made at sign-in. Another site can
// neither read the page that carries it nor make it without the secret, and
// every gateway of the root can check it without keeping anything (they
// share the tokens file, not memory). A new sign-in makes a new nonce, so
// a token of an old session is no longer taken; so does a sign-out.

// setFormCookie starts the forms of a new sign-in session.
func setFormCookie(w http.ResponseWriter, r *http.Request) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	nonce := hex.EncodeToString(b[:])
	http.SetCookie(w, &http.Cookie{Name: FormCookie, Value: nonce, Path: "/", MaxAge: int(sessionMaxAge / time.Second),
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	return nonce
}

func clearFormCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: FormCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
}

func formToken(secret, nonce string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("zkgate dashboard form\x00"))
	m.Write([]byte(nonce))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// FormToken is the token the dashboard's forms shown to r carry, made for
// r's sign-in session; a session signed in before the gateway made
// nonces gets one now, on w. It is "" for a request without a sign-in
// cookie (a bearer token, or tokens off): such a caller has the API, not
// the forms.
func FormToken(w http.ResponseWriter, r *http.Request) string {
	session, err := r.Cookie(SessionCookie)
	if err != nil || session.Value == "" {
		return ""
	}
	nonce := ""
	if c, err := r.Cookie(FormCookie); err == nil && len(c.Value) == 32 {
		nonce = c.Value
	} else {
		nonce = setFormCookie(w, r)
	}
	return formToken(session.Value, nonce)
}

// CheckForm refuses (403) a dashboard form posted without the token of
// the sign-in session it comes with (token: the form's field).
func CheckForm(r *http.Request, token string) error {
	session, err := r.Cookie(SessionCookie)
	if err != nil || session.Value == "" {
		return Forbidden("a dashboard form is posted by a signed-in browser, with its sign-in cookie: use the API with a bearer token instead")
	}
	nonce, err := r.Cookie(FormCookie)
	if err != nil || token == "" {
		return Forbidden("the form has no %s of this sign-in session: open the page again and confirm there", formTokenField)
	}
	if !hmac.Equal([]byte(token), []byte(formToken(session.Value, nonce.Value))) {
		return Forbidden("the form's %s is not this sign-in session's: open the page again and confirm there", formTokenField)
	}
	return nil
}
