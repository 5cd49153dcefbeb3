package zk

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

var (
	zkSrvrOut = `Zookeeper version: 3.4.6-1569965, built on 02/20/2014 09:09 GMT
Latency min/avg/max: 0/1/10
Received: 4207
Sent: 4220
Connections: 81
Outstanding: 1
Zxid: 0x110a7a8f37
Mode: leader
Node count: 306
`
	zkConsOut = ` /10.42.45.231:45361[1](queued=0,recved=9435,sent=9457,sid=0x94c2989e04716b5,lop=PING,est=1427238717217,to=20001,lcxid=0x55120915,lzxid=0xffffffffffffffff,lresp=1427259255908,llat=0,minlat=0,avglat=1,maxlat=17)
 /10.55.33.98:34342[1](queued=0,recved=9338,sent=9350,sid=0x94c2989e0471731,lop=PING,est=1427238849319,to=20001,lcxid=0x55120944,lzxid=0xffffffffffffffff,lresp=1427259252294,llat=0,minlat=0,avglat=1,maxlat=18)
 /10.44.145.114:46556[1](queued=0,recved=109253,sent=109617,sid=0x94c2989e0471709,lop=DELE,est=1427238791305,to=20001,lcxid=0x55139618,lzxid=0x110a7b187d,lresp=1427259257423,llat=2,minlat=0,avglat=1,maxlat=23)

`
)

func TestFLWRuok(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	go tcpServer(l, "")

	oks := FLWRuok([]string{l.Addr().String()}, time.Second*10)
	if len(oks) == 0 {
		t.Errorf("no values returned")
	}
	if !oks[0] {
		t.Errorf("instance should be marked as OK")
	}

	//
	// Confirm that it also returns false for dead instances
	//
	l, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	go tcpServer(l, "dead")

	oks = FLWRuok([]string{l.Addr().String()}, time.Second*10)
	if len(oks) == 0 {
		t.Errorf("no values returned")
	}
	if oks[0] {
		t.Errorf("instance should be marked as not OK")
	}
}

// zkSrvr38Out is the srvr reply of Debian's ZooKeeper 3.8 (standalone, one
// client connected): 3.7 and later write the build date as yyyy-mm-dd, and
// Debian's build leaves the commit placeholder in the version.
const zkSrvr38Out = `Zookeeper version: 3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC
Latency min/avg/max: 1/7.5/22
Received: 9
Sent: 8
Connections: 2
Outstanding: 0
Zxid: 0x2
Mode: standalone
Node count: 5
`

func TestFLWSrvr(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		reply string
		want  ServerStats
	}{
		{
			name:  "3.4",
			reply: zkSrvrOut,
			want: ServerStats{
				Sent: 4220, Received: 4207, NodeCount: 306,
				MinLatency: 0, AvgLatency: 1, MaxLatency: 10,
				Connections: 81, Outstanding: 1,
				Epoch: 17, Counter: 175804215,
				BuildTime: time.Date(2014, 2, 20, 9, 9, 0, 0, time.UTC),
				Mode:      ModeLeader, Version: "3.4.6-1569965",
			},
		},
		{
			name:  "3.8",
			reply: zkSrvr38Out,
			want: ServerStats{
				Sent: 8, Received: 9, NodeCount: 5,
				MinLatency: 1, AvgLatency: 7.5, MaxLatency: 22,
				Connections: 2, Outstanding: 0,
				Epoch: 0, Counter: 2,
				BuildTime: time.Date(2024, 12, 29, 17, 54, 0, 0, time.UTC),
				Mode:      ModeStandalone, Version: "3.8.0-${mvngit.commit.id}",
			},
		},
	}
	for _, tt := range tests {
		tt := tt
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			go replyServer(l, tt.reply)

			statsSlice, ok := FLWSrvr([]string{l.Addr().String()}, time.Second*10)
			if len(statsSlice) != 1 {
				t.Fatalf("got %d *ServerStats, want 1", len(statsSlice))
			}
			got := *statsSlice[0]
			if !ok || got.Error != nil {
				t.Fatalf("failure indicated on 'srvr' parsing: ok %v, error %v", ok, got.Error)
			}
			if !got.BuildTime.Equal(tt.want.BuildTime) {
				t.Errorf("BuildTime %v, want %v", got.BuildTime, tt.want.BuildTime)
			}
			want := tt.want
			want.Server = l.Addr().String()
			got.BuildTime, want.BuildTime = time.Time{}, time.Time{}
			if got != want {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestFLWCons(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	go tcpServer(l, "")

	clients, ok := FLWCons([]string{l.Addr().String()}, time.Second*10)
	if !ok {
		t.Errorf("failure indicated on 'cons' parsing")
	}
	if len(clients) == 0 {
		t.Errorf("no *ServerClients instances returned")
	}

	results := []*ServerClient{
		{
			Queued:        0,
			Received:      9435,
			Sent:          9457,
			SessionID:     669956116721374901,
			LastOperation: "PING",
			Established:   time.Unix(1427238717217, 0),
			Timeout:       20001,
			Lcxid:         1427245333,
			Lzxid:         -1,
			LastResponse:  time.Unix(1427259255908, 0),
			LastLatency:   0,
			MinLatency:    0,
			AvgLatency:    1,
			MaxLatency:    17,
			Addr:          "10.42.45.231:45361",
		},
		{
			Queued:        0,
			Received:      9338,
			Sent:          9350,
			SessionID:     669956116721375025,
			LastOperation: "PING",
			Established:   time.Unix(1427238849319, 0),
			Timeout:       20001,
			Lcxid:         1427245380,
			Lzxid:         -1,
			LastResponse:  time.Unix(1427259252294, 0),
			LastLatency:   0,
			MinLatency:    0,
			AvgLatency:    1,
			MaxLatency:    18,
			Addr:          "10.55.33.98:34342",
		},
		{
			Queued:        0,
			Received:      109253,
			Sent:          109617,
			SessionID:     669956116721374985,
			LastOperation: "DELE",
			Established:   time.Unix(1427238791305, 0),
			Timeout:       20001,
			Lcxid:         1427346968,
			Lzxid:         73190283389,
			LastResponse:  time.Unix(1427259257423, 0),
			LastLatency:   2,
			MinLatency:    0,
			AvgLatency:    1,
			MaxLatency:    23,
			Addr:          "10.44.145.114:46556",
		},
	}

	for _, z := range clients {
		if z.Error != nil {
			t.Errorf("error seen: %v", err.Error())
		}

		for i, v := range z.Clients {
			c := results[i]

			if v.Error != nil {
				t.Errorf("client error seen: %v", err.Error())
			}

			if v.Queued != c.Queued {
				t.Errorf("Queued value mismatch (%d/%d)", v.Queued, c.Queued)
			}

			if v.Received != c.Received {
				t.Errorf("Received value mismatch (%d/%d)", v.Received, c.Received)
			}

			if v.Sent != c.Sent {
				t.Errorf("Sent value mismatch (%d/%d)", v.Sent, c.Sent)
			}

			if v.SessionID != c.SessionID {
				t.Errorf("SessionID value mismatch (%d/%d)", v.SessionID, c.SessionID)
			}

			if v.LastOperation != c.LastOperation {
				t.Errorf("LastOperation value mismatch ('%v'/'%v')", v.LastOperation, c.LastOperation)
			}

			if v.Timeout != c.Timeout {
				t.Errorf("Timeout value mismatch (%d/%d)", v.Timeout, c.Timeout)
			}

			if v.Lcxid != c.Lcxid {
				t.Errorf("Lcxid value mismatch (%d/%d)", v.Lcxid, c.Lcxid)
			}

			if v.Lzxid != c.Lzxid {
				t.Errorf("Lzxid value mismatch (%d/%d)", v.Lzxid, c.Lzxid)
			}

			if v.LastLatency != c.LastLatency {
				t.Errorf("LastLatency value mismatch (%d/%d)", v.LastLatency, c.LastLatency)
			}

			if v.MinLatency != c.MinLatency {
				t.Errorf("MinLatency value mismatch (%d/%d)", v.MinLatency, c.MinLatency)
			}

			if v.AvgLatency != c.AvgLatency {
				t.Errorf("AvgLatency value mismatch (%d/%d)", v.AvgLatency, c.AvgLatency)
			}

			if v.MaxLatency != c.MaxLatency {
				t.Errorf("MaxLatency value mismatch (%d/%d)", v.MaxLatency, c.MaxLatency)
			}

			if v.Addr != c.Addr {
				t.Errorf("Addr value mismatch ('%v'/'%v')", v.Addr, c.Addr)
			}

			if !c.Established.Equal(v.Established) {
				t.Errorf("Established value mismatch (%v/%v)", c.Established, v.Established)
			}

			if !c.LastResponse.Equal(v.LastResponse) {
				t.Errorf("Established value mismatch (%v/%v)", c.LastResponse, v.LastResponse)
			}
		}
	}
}

// zkCons38Out is the cons reply of Debian's ZooKeeper 3.8 with one client
// connected: its last line is the connection that asks, which has no session.
const zkCons38Out = ` /127.0.0.1:57930[1](queued=0,recved=2,sent=2,sid=0x10000d8f2770000,lop=EXIS,est=1795632409660,to=10000,lcxid=0x1,lzxid=0x1,lresp=14260596,llat=5,minlat=0,avglat=13,maxlat=22)
 /127.0.0.1:57932[0](queued=0,recved=1,sent=0)

`

func TestFLWCons38(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go replyServer(l, zkCons38Out)

	servers, ok := FLWCons([]string{l.Addr().String()}, time.Second*10)
	if len(servers) != 1 {
		t.Fatalf("got %d *ServerClients, want 1", len(servers))
	}
	if !ok || servers[0].Error != nil {
		t.Fatalf("failure indicated on 'cons' parsing: ok %v, error %v", ok, servers[0].Error)
	}
	if n := len(servers[0].Clients); n != 1 {
		t.Fatalf("got %d clients, want the one with a session", n)
	}
	c := servers[0].Clients[0]
	if c.Addr != "127.0.0.1:57930" || c.SessionID != 0x10000d8f2770000 || c.LastOperation != "EXIS" ||
		c.Received != 2 || c.Sent != 2 || c.Timeout != 10000 || c.Lcxid != 1 || c.Lzxid != 1 ||
		c.LastLatency != 5 || c.AvgLatency != 13 || c.MaxLatency != 22 {
		t.Errorf("client parsed as %+v", c)
	}
}

func TestFLWConsUnparsedLine(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go replyServer(l, zkCons38Out+"not a connection\n")

	servers, ok := FLWCons([]string{l.Addr().String()}, time.Second*10)
	if ok || len(servers) != 1 || servers[0].Error == nil {
		t.Fatalf("a line that is no connection: ok %v, %d results, want false and the error", ok, len(servers))
	}
	if n := len(servers[0].Clients); n != 1 {
		t.Errorf("got %d clients, want the one parsed", n)
	}
}

// replyServer answers each connection's four-letter word with reply.
func replyServer(listener net.Listener, reply string) {
	for {
		conn, err := listener.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			if _, err := conn.Read(make([]byte, 4)); err != nil {
				return
			}
			conn.Write([]byte(reply))
		}()
	}
}

func tcpServer(listener net.Listener, thing string) {
	for {
		conn, err := listener.Accept()
		if err != nil {
			return
		}
		go connHandler(conn, thing)
	}
}

func connHandler(conn net.Conn, thing string) {
	defer conn.Close()

	data := make([]byte, 4)

	_, err := conn.Read(data)
	if err != nil {
		return
	}

	switch string(data) {
	case "ruok":
		switch thing {
		case "dead":
			return
		default:
			conn.Write([]byte("imok"))
		}
	case "srvr":
		switch thing {
		case "dead":
			return
		default:
			conn.Write([]byte(zkSrvrOut))
		}
	case "cons":
		switch thing {
		case "dead":
			return
		default:
			conn.Write([]byte(zkConsOut))
		}
	default:
		conn.Write([]byte("This ZooKeeper instance is not currently serving requests."))
	}
}

// TestIntegration_FLW asks a real server (Debian's 3.8 here) for srvr, ruok
// and cons, and checks that each reply parses.
func TestIntegration_FLW(t *testing.T) {
	ts, err := StartTestCluster(t, 1, nil, logWriter{t: t, p: "[ZKERR] "})
	requireNoErrorf(t, err, "failed to setup test cluster")
	defer ts.Stop()
	zk, events, err := ts.ConnectAll()
	requireNoErrorf(t, err, "failed to connect to cluster")
	defer zk.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for zk.State() != StateHasSession {
		requireNoErrorf(t, waitForSession(ctx, events), "failed to wait for session")
	}
	if _, _, err := zk.Exists("/"); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ts.Servers[0].Port)

	stats, ok := FLWSrvr([]string{addr}, 10*time.Second)
	if !ok || stats[0].Error != nil {
		t.Fatalf("srvr: ok %v, error %v", ok, stats[0].Error)
	}
	if s := stats[0]; s.Mode != ModeStandalone || !strings.HasPrefix(s.Version, "3.") || s.BuildTime.IsZero() || s.Connections < 1 || s.NodeCount < 1 {
		t.Errorf("srvr parsed as %+v", s)
	}

	if oks := FLWRuok([]string{addr}, 10*time.Second); !oks[0] {
		t.Errorf("ruok: not ok")
	}

	clients, ok := FLWCons([]string{addr}, 10*time.Second)
	if !ok || clients[0].Error != nil {
		t.Fatalf("cons: ok %v, error %v", ok, clients[0].Error)
	}
	found := false
	for _, c := range clients[0].Clients {
		found = found || c.SessionID == zk.SessionID()
	}
	if !found {
		t.Errorf("cons lists no client with session %#x: %+v", zk.SessionID(), clients[0].Clients)
	}
}
