package zk

import (
	"reflect"
	"testing"
)

func TestEncodeDecodePacket(t *testing.T) {
	t.Parallel()
	encodeDecodeTest(t, &requestHeader{-2, 5})
	encodeDecodeTest(t, &connectResponse{1, 2, 3, nil})
	encodeDecodeTest(t, &connectResponse{1, 2, 3, []byte{4, 5, 6}})
	encodeDecodeTest(t, &getAclResponse{[]ACL{{12, "s", "anyone"}}, Stat{}})
	encodeDecodeTest(t, &getChildrenResponse{[]string{"foo", "bar"}})
	encodeDecodeTest(t, &pathWatchRequest{"path", true})
	encodeDecodeTest(t, &pathWatchRequest{"path", false})
	encodeDecodeTest(t, &CheckVersionRequest{"/", -1})
	encodeDecodeTest(t, &reconfigRequest{nil, nil, nil, -1})
	encodeDecodeTest(t, &multiRequest{Ops: []multiRequestOp{{multiHeader{opCheck, false, -1}, &CheckVersionRequest{"/", -1}}}})
}

func TestRequestStructForOp(t *testing.T) {
	for op, name := range opNames {
		if op != opNotify && op != opWatcherEvent {
			if s := requestStructForOp(op); s == nil {
				t.Errorf("No struct for op %s", name)
			}
		}
	}
}

func encodeDecodeTest(t *testing.T, r interface{}) {
	buf := make([]byte, 1024)
	n, err := encodePacket(buf, r)
	if err != nil {
		t.Errorf("encodePacket returned non-nil error %+v\n", err)
		return
	}
	t.Logf("%+v %x", r, buf[:n])
	r2 := reflect.New(reflect.ValueOf(r).Elem().Type()).Interface()
	n2, err := decodePacket(buf[:n], r2)
	if err != nil {
		t.Errorf("decodePacket returned non-nil error %+v\n", err)
		return
	}
	if n != n2 {
		t.Errorf("sizes don't match: %d != %d", n, n2)
		return
	}
	if !reflect.DeepEqual(r, r2) {
		t.Errorf("results don't match: %+v != %+v", r, r2)
		return
	}
}

func TestEncodeShortBuffer(t *testing.T) {
	t.Parallel()
	_, err := encodePacket([]byte{}, &requestHeader{1, 2})
	if err != ErrShortBuffer {
		t.Errorf("encodePacket should return ErrShortBuffer on a short buffer instead of '%+v'", err)
		return
	}
}

func TestDecodeShortBuffer(t *testing.T) {
	t.Parallel()
	_, err := decodePacket([]byte{}, &responseHeader{})
	if err != ErrShortBuffer {
		t.Errorf("decodePacket should return ErrShortBuffer on a short buffer instead of '%+v'", err)
		return
	}
}

func BenchmarkEncode(b *testing.B) {
	buf := make([]byte, 4096)
	st := &connectRequest{Passwd: []byte("1234567890")}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := encodePacket(buf, st); err != nil {
			b.Fatal(err)
		}
	}
}

// TestHeaderCodec: the request and reply headers, coded by hand on every
// packet, are the bytes the reflecting codec makes and reads.
func TestHeaderCodec(t *testing.T) {
	for _, h := range []requestHeader{{0, 0}, {1, opCreate2}, {-2, opPing}, {0x7fffffff, -1}, {-0x80000000, 0x12345678}} {
		want := make([]byte, 8)
		if n, err := encodePacket(want, &h); err != nil || n != 8 {
			t.Fatalf("encodePacket(%+v) = %d, %v", h, n, err)
		}
		got := make([]byte, 8)
		if n, err := h.encode(got); err != nil || n != 8 || string(got) != string(want) {
			t.Fatalf("encode(%+v) = %x, %d, %v; want %x", h, got, n, err, want)
		}
	}
	if _, err := (&requestHeader{}).encode(make([]byte, 7)); err != ErrShortBuffer {
		t.Fatalf("encode into 7 bytes: %v, want ErrShortBuffer", err)
	}
	for _, h := range []responseHeader{{0, 0, 0}, {-1, -1, ErrCode(-101)}, {42, 0x0102030405060708, errSessionExpired}, {-0x80000000, -0x8000000000000000, 0x7fffffff}} {
		buf := make([]byte, 16)
		if _, err := encodePacket(buf, &h); err != nil {
			t.Fatal(err)
		}
		var want, got responseHeader
		if _, err := decodePacket(buf, &want); err != nil {
			t.Fatal(err)
		}
		if n, err := got.decode(buf); err != nil || n != 16 || got != want || got != h {
			t.Fatalf("decode(%x) = %+v, %d, %v; want %+v", buf, got, n, err, want)
		}
	}
	if _, err := (&responseHeader{}).decode(make([]byte, 15)); err != ErrShortBuffer {
		t.Fatalf("decode of 15 bytes: %v, want ErrShortBuffer", err)
	}
}
