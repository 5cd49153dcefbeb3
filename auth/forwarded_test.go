package auth_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zkgate/zkgate/auth"
	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// TestForwardedCallerIsTheTokenOfItsName: the lease's gateway acts for the
// token that the forwarding gateway names, as its own tokens file has it;
// a name it does not know is refused there, and that refusal, as any
// answer of the lease's gateway, reaches the client.
func TestForwardedCallerIsTheTokenOfItsName(t *testing.T) {
	t.Parallel()
	file, secrets := gwtest.NewTokensFile(t)
	a := gwtest.StartSecured(t, gwtest.GatewayOptions{}, file, secrets)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	more := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(more, data, 0o600); err != nil {
		t.Fatal(err)
	}
	late, err := auth.AddToken(more, "late", []string{"*:*:admin"})
	if err != nil {
		t.Fatal(err)
	}
	b := gwtest.StartSecured(t, gwtest.GatewayOptions{Root: a.Root}, more, secrets)
	lease := a.NewLeaseAs(t, "writer")

	r := b.As(t, late, "GET", "/v1/leases/"+lease, nil)
	p := gwtest.WantProblem(t, r, 401, "unauthenticated", "a token a does not know, through b")
	if detail, _ := p["detail"].(string); !strings.Contains(detail, `"late"`) || !strings.Contains(detail, "--auth-file") {
		t.Errorf("the refusal should name the token and --auth-file: %q", detail)
	}
	if r.Header.Get("X-Zkgate-Served-By") == "" {
		t.Errorf("the refusal should be a's: %v", r.Header)
	}
	gwtest.MustStatus(t, b.As(t, "writer", "GET", "/v1/leases/"+lease, nil), 200, "the owner through b")
	gwtest.MustStatus(t, b.As(t, "admin", "POST", "/v1/leases/"+lease+"/keepalive", nil), 200, "an admin through b")
}
