package gwtest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// TestPauseSilencesAtOnce: once Pause returns, the gateway answers
// nothing until Resume, not even a request on a connection it keeps alive.
// kill(2) only queues SIGSTOP: the threads of the gateway run on until
// one of them takes it, and under load they answered such a request.
func TestPauseSilencesAtOnce(t *testing.T) {
	t.Parallel()
	p := gwtest.StartProcess(t, gwtest.GatewayOptions{SessionTimeout: 10 * time.Second})
	for i := range 20 {
		gwtest.Do(t, "GET", p.URL+"/readyz", nil) // leaves a connection kept alive
		p.Pause(t)
		// A stopped gateway never answers, however long it is given: the
		// bound only ends the wait.
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		r, err := gwtest.DoCtx(ctx, "GET", p.URL+"/readyz", nil)
		cancel()
		if err == nil {
			t.Fatalf("pause %d: the paused gateway answered %d", i+1, r.Status)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("pause %d: %v, want no answer", i+1, err)
		}
		p.Resume()
	}
}
