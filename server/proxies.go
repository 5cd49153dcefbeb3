package server

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// trustedProxies are --trusted-proxies: the addresses of the reverse proxies
// and load balancers in front of the gateway. From them alone, a request's
// client address is taken from X-Forwarded-For (or, without it, Forwarded),
// so that a gateway without tokens behind a proxy keeps its caps per client
// (--max-leases-per-token, --lease-rate, the waiter and request caps), and
// its logs name the client; from anyone else those headers are not
// believed (anyone can send them).
type trustedProxies []netip.Prefix

// parseTrustedProxies reads a list of CIDRs or addresses.
func parseTrustedProxies(s string) (trustedProxies, error) {
	var out trustedProxies
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if p, err := netip.ParsePrefix(part); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(part)
		if err != nil {
			return nil, usagef("--trusted-proxies: %q is neither an address nor a CIDR (such as 10.0.0.0/8)", part)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// trusts reports whether a is one of the proxies.
func (tp trustedProxies) trusts(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range tp {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// client is the address of the client behind r: r's peer, unless that is
// a trusted proxy, in which case the nearest address of the forwarding
// chain that is no trusted proxy (the chain's first when all are). A chain
// with an entry that is no address stops there: what a client wrote
// before a trusted proxy added its part is not believed past it.
func (tp trustedProxies) client(r *http.Request) (addr string, viaProxy bool) {
	peer := hostOf(r.RemoteAddr)
	pa, err := netip.ParseAddr(peer)
	if len(tp) == 0 || err != nil || !tp.trusts(pa) {
		return r.RemoteAddr, false
	}
	chain := forwardedFor(r.Header)
	if len(chain) == 0 {
		return r.RemoteAddr, false
	}
	for i := len(chain) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(chain[i])
		if err != nil {
			return r.RemoteAddr, false
		}
		if !tp.trusts(a) || i == 0 {
			return net.JoinHostPort(a.Unmap().String(), "0"), true
		}
	}
	return r.RemoteAddr, false
}

// forwardedFor is the chain of client addresses of X-Forwarded-For, or
// else of Forwarded's for= (RFC 7239), first the farthest.
func forwardedFor(h http.Header) []string {
	var out []string
	if xff := h.Values("X-Forwarded-For"); len(xff) > 0 {
		for _, v := range xff {
			for _, part := range strings.Split(v, ",") {
				out = append(out, hostOf(strings.TrimSpace(part)))
			}
		}
		return out
	}
	for _, v := range h.Values("Forwarded") {
		for _, elem := range strings.Split(v, ",") {
			for _, pair := range strings.Split(elem, ";") {
				k, val, ok := strings.Cut(strings.TrimSpace(pair), "=")
				if ok && strings.EqualFold(k, "for") {
					out = append(out, hostOf(strings.Trim(val, `"`)))
				}
			}
		}
	}
	return out
}

// hostOf is the host of host:port, [v6]:port, v6 or a bare host.
func hostOf(s string) string {
	if h, _, err := net.SplitHostPort(s); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
}
