package proc

import (
	"strings"
	"testing"
)

// TestAnnouncedURL: the URL of the first "zkgate listening on" line, with
// its scheme, and nothing from other lines.
func TestAnnouncedURL(t *testing.T) {
	out := "starting\nzkgate listening on https://127.0.0.1:4321 (ZooKeeper 127.0.0.1:2181, root /zkgate)\n" +
		"zkgate listening on http://127.0.0.1:9 (again)\n"
	url := make(chan string, 1)
	AnnouncedURL(strings.NewReader(out), url)
	if got := <-url; got != "https://127.0.0.1:4321" {
		t.Fatalf("URL %q, want https://127.0.0.1:4321", got)
	}
	AnnouncedURL(strings.NewReader("zkgate starting\n"), url)
	select {
	case got := <-url:
		t.Fatalf("URL %q from output that announces none", got)
	default:
	}
}
