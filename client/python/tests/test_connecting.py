"""How the client finds and reaches its gateway: ZKGATE_URL and ZKGATE_TOKEN
(read as the Go and Node clients read them), and a gateway nobody listens for.
Run by scripts/test-clients.sh, which starts a gateway and sets ZKGATE_URL."""

from __future__ import annotations

import http.client
import http.server
import os
import socket
import sys
import threading
import unittest
from typing import Dict, List, Optional, Tuple
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import zkgate  # noqa: E402
from test_client import PATIENCE, URL, LoopbackServer, pipe  # noqa: E402


class RecordingProxy(LoopbackServer):
    """An HTTP proxy in front of the gateway that records the Authorization
    header of every request it passes on."""

    def __init__(self, upstream: str) -> None:
        host_port = upstream.split("//", 1)[1].split("/", 1)[0]
        host, port = host_port.rsplit(":", 1)
        proxy = self
        self.auth: List[Optional[str]] = []
        self.trace: List[Tuple[Optional[str], Optional[str]]] = []  # (traceparent, tracestate) of each request

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def relay(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                proxy.auth.append(self.headers.get("Authorization"))
                proxy.trace.append((self.headers.get("traceparent"), self.headers.get("tracestate")))
                conn = http.client.HTTPConnection(host, int(port), timeout=PATIENCE)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                    conn.request(self.command, self.path, body=body or None, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                finally:
                    conn.close()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("connection", "transfer-encoding", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = relay

        self.serve(Handler)


def dead_address() -> str:
    """A loopback host:port nobody listens on: a port taken, then let go."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return "127.0.0.1:%d" % port


class EnvironmentTest(unittest.TestCase):
    def setUp(self) -> None:
        self.proxy = RecordingProxy(URL)
        self.addCleanup(self.proxy.close)

    def env(self, **values: str) -> None:
        patch = mock.patch.dict(os.environ, values)
        patch.start()
        self.addCleanup(patch.stop)

    def test_defaults(self) -> None:
        self.env(ZKGATE_URL="", ZKGATE_TOKEN="")
        gate = zkgate.Gateway()
        self.assertEqual(gate.url, "http://127.0.0.1:8080")
        self.assertEqual(zkgate.DEFAULT_URL, "http://127.0.0.1:8080")
        self.assertIsNone(gate.token)

    def test_url_and_token_from_the_environment(self) -> None:
        self.env(ZKGATE_URL=" %s " % self.proxy.host_port, ZKGATE_TOKEN="from-env")
        gate = zkgate.Gateway()
        self.assertEqual(gate.url, "http://" + self.proxy.host_port)
        gate.list("locks")
        self.assertEqual(self.proxy.auth[-1], "Bearer from-env")

    def test_what_the_caller_gives_wins(self) -> None:
        self.env(ZKGATE_URL="http://127.0.0.1:9", ZKGATE_TOKEN="from-env")
        gate = zkgate.Gateway(self.proxy.host_port, "given")
        self.assertEqual(gate.url, "http://" + self.proxy.host_port)
        gate.list("locks")
        self.assertEqual(self.proxy.auth[-1], "Bearer given")
        zkgate.Gateway("http://" + self.proxy.host_port, "").list("locks")
        self.assertIsNone(self.proxy.auth[-1])

    def test_urls(self) -> None:
        self.env(ZKGATE_URL="")
        for given, want in {"localhost:8080": "http://localhost:8080", "[::1]:80": "http://[::1]:80",
                            "https://h:1/base/": "https://h:1/base", "h:1/base": "http://h:1/base"}.items():
            self.assertEqual(zkgate.Gateway(given).url, want, given)
        for bad in ("ftp://h:1", "http://", "http://h:1/?q=1", "http://u@h:1", "http://h:1/#f"):
            with self.assertRaises(zkgate.InvalidRequest, msg=bad):
                zkgate.Gateway(bad)
            self.env(ZKGATE_URL=bad)
            with self.assertRaises(zkgate.InvalidRequest, msg=bad):
                zkgate.Gateway()
            self.env(ZKGATE_URL="")


class TraceHeadersTest(unittest.TestCase):
    """trace_headers: every request carries the W3C trace context the hook
    gives at the time of the call (a lease's grant and acquire among them);
    a malformed traceparent, or none, sends nothing; other keys are never
    sent."""

    def setUp(self) -> None:
        self.proxy = RecordingProxy(URL)
        self.addCleanup(self.proxy.close)

    def test_trace_headers(self) -> None:
        current: Dict[str, str] = {}
        gate = zkgate.Gateway(self.proxy.host_port, trace_headers=lambda: dict(current))
        tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        current.update(traceparent=tp, tracestate="vendor=1", authorization="Bearer not-this")
        lease = gate.lease("30s", holder="traced")
        try:
            lease.lock("traced-py", wait="1s").release()
            self.assertEqual(self.proxy.trace[-2:], [(tp, "vendor=1")] * 2, "acquire and release")
            self.assertTrue(all(a is None for a in self.proxy.auth), self.proxy.auth)
            current.clear()
            gate.list("locks")
            self.assertEqual(self.proxy.trace[-1], (None, None), "no trace context")
            current.update(traceparent="00-not-one", tracestate="vendor=1")
            gate.list("locks")
            self.assertEqual(self.proxy.trace[-1], (None, None), "a malformed traceparent")
        finally:
            current.clear()
            lease.revoke()
        self.assertEqual(self.proxy.trace[0], (tp, "vendor=1"), "the lease's grant")


class UnreachableTest(unittest.TestCase):
    """A gateway nobody listens for: Unreachable, naming the URL, after
    1 + connect_retries connection attempts, whatever the call."""

    def attempts(self, call) -> int:
        real = http.client.HTTPConnection.connect
        count = [0]

        def counting(conn: http.client.HTTPConnection) -> None:
            count[0] += 1
            real(conn)

        with mock.patch.object(http.client.HTTPConnection, "connect", counting):
            call()
        return count[0]

    def test_unreachable(self) -> None:
        address = dead_address()
        gate = zkgate.Gateway(address)
        calls = {
            "lease": lambda: gate.lease(),
            "state": lambda: gate.state("locks", "x"),
            "produce": lambda: gate.produce("q", b"x"),
            "wait_barrier": lambda: gate.wait_barrier("b", wait="1m"),
        }
        for name, call in calls.items():
            def failing() -> None:
                with self.assertRaises(zkgate.Unreachable, msg=name) as caught:
                    call()
                self.assertIn("http://" + address, str(caught.exception))
                self.assertIsInstance(caught.exception.__cause__, zkgate.TransportError)
                self.assertIsInstance(caught.exception, zkgate.TransportError)
            self.assertEqual(self.attempts(failing), 1 + zkgate.DEFAULT_CONNECT_RETRIES, name)
        self.assertEqual(zkgate.DEFAULT_CONNECT_RETRIES, 3)

        for gate in (zkgate.Gateway(address, connect_retries=0), zkgate.Gateway(address, retry_for=0)):
            def once() -> None:
                with self.assertRaises(zkgate.Unreachable):
                    gate.state("locks", "x")
            self.assertEqual(self.attempts(once), 1)
        self.assertFalse(zkgate.Gateway(address).ready())


class Front:
    """A TCP front at a loopback address that passes connections on to the
    gateway; stopped, it refuses them (nothing listens there), as a
    gateway's address does while it restarts."""

    def __init__(self, upstream: str) -> None:
        host_port = upstream.split("//", 1)[1].split("/", 1)[0]
        host, port = host_port.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.conns: List[socket.socket] = []
        self.mu = threading.Lock()
        self.listener: Optional[socket.socket] = None
        self.port = 0
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        ln = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ln.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ln.bind(("127.0.0.1", self.port))
        ln.listen(64)
        self.port = ln.getsockname()[1]
        with self.mu:
            self.listener = ln
        threading.Thread(target=self.accept, args=(ln,), daemon=True).start()

    def accept(self, ln: socket.socket) -> None:
        while True:
            try:
                inbound, _ = ln.accept()
            except OSError:
                return
            outbound = socket.create_connection(self.upstream, timeout=PATIENCE)
            with self.mu:
                self.conns += [inbound, outbound]
            for a, b in ((inbound, outbound), (outbound, inbound)):
                threading.Thread(target=pipe, args=(a, b), daemon=True).start()

    def stop(self) -> None:
        with self.mu:
            if self.listener is not None:
                self.listener.close()
                self.listener = None
            for c in self.conns:
                c.close()
            self.conns = []


class RestartTest(unittest.TestCase):
    """While a lease is known to live, a call made for it rides through a
    gateway that refuses connections for a while (its restart): a lock asked
    for while nothing listens is granted once the address listens again,
    1.5 s later. A call for no lease still fails at once (UnreachableTest)."""

    def test_lease_calls_ride_through_a_restart(self) -> None:
        front = Front(URL)
        self.addCleanup(front.stop)
        gate = zkgate.Gateway(front.url)
        with gate.lease(ttl="30s", holder="py-restart") as lease:
            front.stop()
            timer = threading.Timer(1.5, front.start)  # the gateway's restart takes that long
            timer.start()
            self.addCleanup(timer.cancel)
            grant = lease.lock("py-ride", wait="10s")
            self.assertIsNone(lease.error)
            grant.release()


if __name__ == "__main__":
    unittest.main()
