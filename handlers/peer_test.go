package handlers

import (
	"net/http"
	"strings"
	"testing"
)

// TestParseProof: the forwarding header is read strictly; what a gateway
// writes reads back the same.
func TestParseProof(t *testing.T) {
	good := proof{from: "gw-a", to: "gw-b", caller: "billing", nonce: "AAAAAAAAAAAAAAAAAAAAAA", at: 1700000000, mac: "bWFj"}
	got, err := parseProof(good.String())
	if err != nil || got != good {
		t.Fatalf("parseProof(%q) = %+v, %v", good.String(), got, err)
	}
	noCaller := good
	noCaller.caller, noCaller.mac = "", ""
	if got, err := parseProof(noCaller.String()); err != nil || got != noCaller {
		t.Errorf("a proof without caller nor mac: %+v, %v", got, err)
	}
	for _, h := range []string{
		"",
		"v2 from=a to=b t=1 n=AAAAAAAAAAAAAAAAAAAAAA caller=",
		"from=a to=b t=1 n=AAAAAAAAAAAAAAAAAAAAAA caller=",
		"v1 to=b t=1 n=AAAAAAAAAAAAAAAAAAAAAA caller=",                                   // no from
		"v1 from=a to=b n=AAAAAAAAAAAAAAAAAAAAAA caller=",                                // no t
		"v1 from=a to=b t=1 caller=",                                                     // no nonce
		"v1 from=a to=b t=1 n=AAAAAAAAAAAAAAAAAAAAAA",                                    // no caller
		"v1 from=a from=c to=b t=1 n=AAAAAAAAAAAAAAAAAAAAAA caller=",                     // twice
		"v1 from=a to=b t=1 n=AAAAAAAAAAAAAAAAAAAAAA caller= extra=1",                    // unknown field
		"v1 from=a to=b t=1 n=AAAAAAAAAAAAAAAAAAAAAA caller= mac",                        // no value
		"v1 from=a to=b t=soon n=AAAAAAAAAAAAAAAAAAAAAA caller=",                         // not a time
		"v1 from=a to=b t=1 n=AAAA caller=",                                              // short nonce
		"v1 from=a to=b t=1 n=AAAAAAAAAAAAAAAAAAAAAA caller=ad/min",                      // not a name
		"v1 from= to=b t=1 n=AAAAAAAAAAAAAAAAAAAAAA caller=",                             // empty id
		"v1 from=a to=b t=1 n=AAAAAAAAAAAAAAAAAAAAAA caller=" + strings.Repeat("x", 201), // too long
	} {
		if f, err := parseProof(h); err == nil {
			t.Errorf("parseProof(%q) = %+v, want an error", h, f)
		}
	}
}

// TestAnswerFieldsCoverWhatIsRelayed: the proof of an answer covers every
// header relayed to the client, and none that is not.
func TestAnswerFieldsCoverWhatIsRelayed(t *testing.T) {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-Zkgate-Index", "7")
	h.Set("X-Request-Id", "r1")
	base := strings.Join(answerFields("n", 200, h, []byte("{}")), "|")
	for name, change := range map[string]func(http.Header){
		"a relayed header changed": func(h http.Header) { h.Set("X-Zkgate-Index", "8") },
		"a relayed header added":   func(h http.Header) { h.Set("Location", "/v1/leases/x") },
		"a relayed header removed": func(h http.Header) { h.Del("Content-Type") },
	} {
		c := h.Clone()
		change(c)
		if strings.Join(answerFields("n", 200, c, []byte("{}")), "|") == base {
			t.Errorf("%s: the proof covers the same", name)
		}
	}
	c := h.Clone()
	c.Set("X-Request-Id", "r2")
	c.Set(servedByHeader, "elsewhere")
	if strings.Join(answerFields("n", 200, c, []byte("{}")), "|") != base {
		t.Error("a header that is not relayed changed what the proof covers")
	}
	for name, other := range map[string][]string{
		"status": answerFields("n", 201, h, []byte("{}")),
		"body":   answerFields("n", 200, h, []byte("[]")),
		"nonce":  answerFields("m", 200, h, []byte("{}")),
	} {
		if strings.Join(other, "|") == base {
			t.Errorf("another %s: the proof covers the same", name)
		}
	}
}
