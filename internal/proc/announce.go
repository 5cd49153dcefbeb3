package proc

import (
	"bufio"
	"io"
	"strings"
)

// AnnouncedURL reads a gateway's stdout to its end, sending to url, if it
// has room, the URL of each "zkgate listening on URL (...)" line, the line
// the gateway prints once it serves. Reading to the end keeps a gateway
// that writes more from blocking on a full pipe.
func AnnouncedURL(stdout io.Reader, url chan<- string) {
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "zkgate listening on "); ok {
			u, _, _ := strings.Cut(rest, " ")
			select {
			case url <- u:
			default:
			}
		}
	}
	_, _ = io.Copy(io.Discard, stdout)
}
