// Package static holds the dashboard's CSS, JavaScript and icon, embedded
// into the binary: the dashboard works offline, with no CDN and no build
// step.
package static

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
)

//go:embed *.css *.js *.svg
var files embed.FS

// FS returns the static files.
func FS() fs.FS { return files }

// Version is a hash of every static file, to version their URLs.
func Version() string {
	h := sha256.New()
	entries, _ := fs.ReadDir(files, ".")
	for _, e := range entries {
		b, _ := fs.ReadFile(files, e.Name())
		h.Write([]byte(e.Name()))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}
