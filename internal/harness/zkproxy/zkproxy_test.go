package zkproxy_test

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/zkgate/zkgate/internal/harness/zkproxy"
	"github.com/zkgate/zkgate/internal/harness/zktest"
	"github.com/zkgate/zkgate/internal/zk"
)

func TestMain(m *testing.M) { os.Exit(zktest.Run(m)) }

const opGetData = 4

var acl = zk.WorldACL(zk.PermAll)

// setUp returns a proxy to the shared ZooKeeper, a client through it, a
// client straight to ZooKeeper, and a root made for the test.
func setUp(t *testing.T) (*zkproxy.Proxy, *zk.Conn, *zk.Conn, string) {
	t.Helper()
	p := zkproxy.New(t, zktest.Shared(t).Addr())
	through := zktest.Connect(t, []string{p.Addr()}, 10*time.Second)
	direct := zktest.Connect(t, nil, 10*time.Second)
	root := zktest.UniqueRoot(t)
	if _, err := direct.Create(root, nil, 0, acl); err != nil {
		t.Fatal(err)
	}
	return p, through, direct, root
}

// The proxy notes each request's opcode and path, in order, with the
// replies its client had by then, and answers a request it is told is
// unknown as an older ZooKeeper does: unimplemented.
func TestRequestsAreNotedAndAnUnknownOneRefused(t *testing.T) {
	t.Parallel()
	p, through, _, root := setUp(t)
	if _, err := through.Create(root+"/a", nil, 0, acl); err != nil {
		t.Fatal(err)
	}
	if _, _, err := through.Get(root + "/a"); err != nil {
		t.Fatal(err)
	}
	sent := p.Requests(root + "/a")
	if len(sent) != 2 || sent[0].Op != 1 && sent[0].Op != 15 || sent[1].Op != opGetData || sent[1].Answered != sent[0].Answered+1 {
		t.Fatalf("requests noted %+v, want a create then a getData sent after its reply", sent)
	}
	p.Unknown(opGetData)
	if _, _, err := through.Get(root + "/a"); !errors.Is(err, zk.ErrUnimplemented) {
		t.Fatalf("a getData the proxy does not know: %v, want unimplemented", err)
	}
}

// A paused proxy holds what comes in, and passes it on once resumed; a
// reply lost on its way leaves the request applied and the client
// unanswered until its connection is dropped.
func TestPauseHoldsAndALostReplyIsApplied(t *testing.T) {
	t.Parallel()
	p, through, direct, root := setUp(t)
	p.Pause()
	created := make(chan error, 1)
	go func() { _, err := through.Create(root+"/paused", nil, 0, acl); created <- err }()
	zktest.Eventually(t, 10*time.Second, func() error {
		if !p.Held(root + "/paused") {
			return fmt.Errorf("the create is not held")
		}
		return nil
	})
	if ok, _, err := direct.Exists(root + "/paused"); err != nil || ok {
		t.Fatalf("a create held by the pause reached ZooKeeper (%v)", err)
	}
	p.Resume()
	if err := <-created; err != nil {
		t.Fatalf("the create after the resume: %v", err)
	}

	p.OnRequest(func(r zkproxy.Request) zkproxy.Action {
		if r.Path == root+"/lost" {
			return zkproxy.LoseReply
		}
		return zkproxy.Pass
	})
	go func() { _, err := through.Create(root+"/lost", nil, 0, acl); created <- err }()
	zktest.Eventually(t, 10*time.Second, func() error {
		if ok, _, err := direct.Exists(root + "/lost"); err != nil || !ok {
			return fmt.Errorf("the create is not applied (%v)", err)
		}
		return nil
	})
	select {
	case err := <-created:
		t.Fatalf("the create was answered (%v) though its reply was lost", err)
	default:
	}
	p.Drop()
	if err := <-created; err == nil {
		t.Fatal("the create whose reply was lost answered success")
	}
}
