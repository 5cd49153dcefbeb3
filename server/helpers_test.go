package server_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/zkgate/zkgate/internal/harness/dashtest"
	"github.com/zkgate/zkgate/internal/harness/gwtest"
)

// The helpers of the dashboard's tests, shared with the server's: the
// pages and metrics as a client reads them (gwtest), and the browser
// (dashtest).

func getPage(t *testing.T, u string) (int, http.Header, string) {
	t.Helper()
	return gwtest.GetPage(t, u)
}

// metricValue reads one series of /metrics.
func metricValue(t *testing.T, base, name string) float64 {
	t.Helper()
	return gwtest.Metric(t, base, "", name)
}

// metricValueAs is metricValue with a token ("" for none).
func metricValueAs(t *testing.T, base, secret, name string) float64 {
	t.Helper()
	return gwtest.Metric(t, base, secret, name)
}

func startBrowser(t *testing.T, more ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	return dashtest.StartBrowser(t, more...)
}

func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	dashtest.Step(t, ctx, what, actions...)
}
