//go:build linux

package faults

import (
	"net"
	"sync"
)

// link is a gateway's way to ZooKeeper: one loopback TCP proxy per ensemble
// member, so that the gateway still fails over between members, and so that
// the whole of it can be cut (a network partition between that gateway and
// ZooKeeper) and healed.
type link struct {
	proxies []*proxy
}

func newLink(targets []string) (*link, error) {
	l := &link{}
	for _, t := range targets {
		p, err := newProxy(t)
		if err != nil {
			l.close()
			return nil, err
		}
		l.proxies = append(l.proxies, p)
	}
	return l, nil
}

// addrs are the proxies' addresses, in the order of the targets.
func (l *link) addrs() []string {
	out := make([]string, len(l.proxies))
	for i, p := range l.proxies {
		out[i] = p.addr()
	}
	return out
}

func (l *link) cut() {
	for _, p := range l.proxies {
		p.cut()
	}
}

func (l *link) heal() {
	for _, p := range l.proxies {
		p.heal()
	}
}

func (l *link) close() {
	for _, p := range l.proxies {
		p.close()
	}
}

// proxy forwards loopback TCP connections to one target. Cut turns it into
// a black hole, as a partition would: bytes from either side are read and
// dropped, connections stay open (so the gateway notices only by its own
// timeouts), and new connections are accepted but go nowhere. Heal closes
// every connection that lived through the cut (their streams lost bytes)
// and lets new ones through again.
type proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cutAt bool
	conns map[*pair]struct{}
	done  bool
	wg    sync.WaitGroup
}

// pair is one proxied connection.
type pair struct {
	client, server net.Conn // server is nil for a connection accepted during a cut
	mu             sync.Mutex
	holed          bool // it lived through a cut: nothing more is forwarded
	closed         bool
}

func newProxy(target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, target: target, conns: map[*pair]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		pr := &pair{client: c}
		p.mu.Lock()
		if p.done {
			p.mu.Unlock()
			c.Close()
			return
		}
		holed := p.cutAt
		p.conns[pr] = struct{}{}
		p.mu.Unlock()
		if holed {
			pr.holed = true
			p.wg.Add(1)
			go p.sink(pr)
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil { // the member is down: the client sees a closed connection
			p.drop(pr)
			continue
		}
		pr.mu.Lock()
		if pr.closed {
			pr.mu.Unlock()
			s.Close()
			continue
		}
		pr.server = s
		pr.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(pr, s, c)
		go p.pipe(pr, c, s)
	}
}

// sink reads and drops what a client sends on a connection accepted
// during a cut, until heal closes it.
func (p *proxy) sink(pr *pair) {
	defer p.wg.Done()
	buf := make([]byte, 4096)
	for {
		if _, err := pr.client.Read(buf); err != nil {
			p.drop(pr)
			return
		}
	}
}

func (p *proxy) pipe(pr *pair, dst, src net.Conn) {
	defer p.wg.Done()
	defer p.drop(pr)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			pr.mu.Lock()
			holed := pr.holed
			pr.mu.Unlock()
			if !holed {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// drop closes both ends of pr and forgets it.
func (p *proxy) drop(pr *pair) {
	pr.mu.Lock()
	pr.closed = true
	pr.client.Close()
	if pr.server != nil {
		pr.server.Close()
	}
	pr.mu.Unlock()
	p.mu.Lock()
	delete(p.conns, pr)
	p.mu.Unlock()
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutAt = true
	for pr := range p.conns {
		pr.mu.Lock()
		pr.holed = true
		pr.mu.Unlock()
	}
}

func (p *proxy) heal() {
	p.mu.Lock()
	p.cutAt = false
	var holed []*pair
	for pr := range p.conns {
		pr.mu.Lock()
		if pr.holed {
			holed = append(holed, pr)
		}
		pr.mu.Unlock()
	}
	p.mu.Unlock()
	for _, pr := range holed {
		p.drop(pr)
	}
}

func (p *proxy) close() {
	p.mu.Lock()
	p.done = true
	conns := make([]*pair, 0, len(p.conns))
	for pr := range p.conns {
		conns = append(conns, pr)
	}
	p.mu.Unlock()
	p.ln.Close()
	for _, pr := range conns {
		p.drop(pr)
	}
	p.wg.Wait()
}
