package server

import (
	"net/http"
	"net/http/pprof"
	"runtime"
)

// debugHandler serves net/http/pprof for --debug-listen, on an address of its
// own (never the API's), and turns on the block and mutex profiles, which
// cost a little and are off otherwise.
func debugHandler() http.Handler {
	runtime.SetBlockProfileRate(10_000) // one sample per 10µs spent blocked
	runtime.SetMutexProfileFraction(100)
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index) // also heap, goroutine, block, mutex, allocs, threadcreate
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
