"""A lease's deadline against a gateway that hangs: it accepts every
connection and reads every request, then answers only the lease's creation
and lock acquires, as a gateway frozen (SIGSTOP, a stalled machine) just
after them (or, to a test that asks, answers an acquire whose reply ends
only as the lease is lost). Needs no real gateway: the deadline must hold
whatever the gateway does."""

from __future__ import annotations

import http.server
import json
import os
import sys
import threading
import time
import unittest
from typing import List, Optional

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import zkgate  # noqa: E402

# Bounds of the waits in these tests: generous, since they only end a test
# that fails, and shorter than a blocked call's own timeout (its wait of 30s
# plus the client's 10s), which is what they tell apart from the deadline.
PATIENCE = 20.0


def stamp(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%09dZ" % int((t % 1) * 1e9)


class HungGateway:
    """Answers a lease's creation (a promise of 1.5s, a TTL of 2s) and lock
    acquires; every other request (keepalives, campaigns, claims, revokes)
    is read and never answered until close."""

    LEASE = "7a6b5c4d-1a2b-4c3d-8e9f-001122334455"

    def __init__(self) -> None:
        fake = self
        self.release = threading.Event()
        # When set, a lock acquire's answer is sent whole but ended (its
        # connection closed: no Content-Length) only once this is set.
        self.grants_end_with: Optional[threading.Event] = None
        self.hanging = 0  # requests held unanswered right now
        self.hung: List[str] = []  # every path held
        self._mu = threading.Condition()

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def answer(self, status: int, doc: dict) -> None:
                body = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("X-Zkgate-Time", stamp(time.time()))
                self.end_headers()
                self.wfile.write(body)

            def answer_ending_on(self, status: int, doc: dict, end: threading.Event) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("X-Zkgate-Time", stamp(time.time()))
                self.end_headers()
                self.wfile.write(json.dumps(doc).encode())
                self.wfile.flush()
                end.wait(PATIENCE)
                self.close_connection = True

            def hang(self) -> None:
                with fake._mu:
                    fake.hanging += 1
                    fake.hung.append(self.path.split("?")[0])
                    fake._mu.notify_all()
                fake.release.wait()
                with fake._mu:
                    fake.hanging -= 1
                    fake._mu.notify_all()
                self.close_connection = True

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = self.path.split("?")[0]
                now = time.time()
                if path == "/v1/leases":
                    self.answer(201, {"id": fake.LEASE, "gateway": "g", "ttl": "2s", "holder": "h",
                                      "lock_delay": "0s", "expires_at": stamp(now + 1.5),
                                      "created_at": stamp(now), "holds": []})
                elif path.startswith("/v1/locks/") and path.endswith("/acquire"):
                    grant = {"name": path.split("/")[3], "mode": "exclusive", "lease": fake.LEASE,
                             "token": 7, "node": "/zkgate/locks/x/_c_1-lock-0000000000", "acquired_at": stamp(now)}
                    if fake.grants_end_with is None:
                        self.answer(200, grant)
                    else:
                        self.answer_ending_on(200, grant, fake.grants_end_with)
                else:
                    self.hang()

            do_GET = do_PUT = do_DELETE = hang

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def wait_hung(self, path: str) -> bool:
        """Whether a request for path is held unanswered within PATIENCE."""
        with self._mu:
            return self._mu.wait_for(lambda: path in self.hung, PATIENCE)

    def close(self) -> None:
        """Lets the held requests go unanswered, and stops serving."""
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(PATIENCE)


class HungGatewayTest(unittest.TestCase):
    def setUp(self) -> None:
        self.threads_before = {t.ident for t in threading.enumerate()}
        self.fake = HungGateway()
        self.addCleanup(self.nothing_left)
        self.addCleanup(self.fake.close)
        self.gate = zkgate.Gateway(self.fake.url)

    def nothing_left(self) -> None:
        """No thread of the client, and no request, outlives the test."""
        with self.fake._mu:
            self.assertTrue(self.fake._mu.wait_for(lambda: self.fake.hanging == 0, PATIENCE),
                            "the gateway's held requests did not end")
        deadline = time.monotonic() + PATIENCE
        while True:
            left = [t.name for t in threading.enumerate()
                    if t.ident not in self.threads_before and t.is_alive()]
            if not left:
                return
            if time.monotonic() > deadline:
                self.fail(f"threads left behind: {left}")
            for t in threading.enumerate():
                if t.ident not in self.threads_before and t is not threading.current_thread():
                    t.join(max(0.0, deadline - time.monotonic()))

    def run_holder(self, body) -> "Holder":
        h = Holder(body)
        h.start()
        return h

    def assert_stopped_by_the_lease(self, lease: zkgate.Lease, holder: "Holder") -> None:
        self.assertTrue(lease.lost.wait(PATIENCE), "the lease outlived its deadline while its gateway hung")
        self.assertIn("confirmed before the deadline", str(lease.error))
        holder.join(PATIENCE)
        self.assertFalse(holder.is_alive(), "the holder's call went on past the lease's end while the gateway hung")
        self.assertFalse(self.fake.release.is_set())
        self.assertIsInstance(holder.error, zkgate.LeaseLost, f"the holder ended with {holder.error!r}")
        self.assertIs(holder.error, lease.error)

    def test_lead_blocked_in_a_campaign_ends_with_the_lease(self) -> None:
        lease = self.gate.lease(ttl="1m")
        holder = self.run_holder(lambda: lease.lead("scheduler", round="30s"))
        self.assertTrue(self.fake.wait_hung("/v1/elections/scheduler/campaign"))
        self.assert_stopped_by_the_lease(lease, holder)
        with self.assertRaises(zkgate.LeaseLost):
            lease.revoke()

    def test_consume_under_a_lock_ends_with_the_lease(self) -> None:
        lease = self.gate.lease(ttl="1m")
        grant = lease.lock("invoices")

        def hold() -> None:
            with grant:
                for item in lease.consume("emails", wait="30s"):
                    item.ack()

        holder = self.run_holder(hold)
        self.assertTrue(self.fake.wait_hung("/v1/queues/emails/claim"))
        self.assert_stopped_by_the_lease(lease, holder)

    def test_a_grant_read_as_the_lease_ends_raises_its_lease_lost(self) -> None:
        # The grant's answer is whole when its connection ends, and it ends
        # as the lease is lost (the lease's end cuts it off): the lock must
        # not be handed to the holder, whose block would run past the
        # deadline believing it holds it.
        lease = self.gate.lease(ttl="1m")
        self.fake.grants_end_with = lease.lost
        ran: List[bool] = []

        def hold() -> None:
            with lease.lock("invoices", wait="30s"):
                ran.append(True)

        holder = self.run_holder(hold)
        self.assertTrue(lease.lost.wait(PATIENCE), "the lease outlived its deadline while its gateway hung")
        holder.join(PATIENCE)
        self.assertEqual(ran, [], "the lock's block ran under a lease already lost")
        self.assert_stopped_by_the_lease(lease, holder)

    def test_observe_following_the_leadership_ends_with_the_lease(self) -> None:
        # Following the election while leading, until the lease ends: the
        # lease's end stops the read in flight, not only the next one. The
        # first read has no wait: a timeout past PATIENCE keeps it from
        # ending by itself within the test.
        gate = zkgate.Gateway(self.fake.url, timeout=2 * PATIENCE)
        lease = gate.lease(ttl="1m")
        seen: List[dict] = []

        def follow() -> None:
            for state in gate.observe("scheduler", wait="30s", stop=lease.lost):
                seen.append(state)

        holder = self.run_holder(follow)
        self.assertTrue(self.fake.wait_hung("/v1/elections/scheduler"))
        self.assertTrue(lease.lost.wait(PATIENCE), "the lease outlived its deadline while its gateway hung")
        holder.join(PATIENCE)
        self.assertFalse(holder.is_alive(), "observe went on past the lease's end while the gateway hung")
        self.assertFalse(self.fake.release.is_set())
        self.assertIsNone(holder.error)  # a stop ends the loop
        self.assertEqual(seen, [])


class Holder(threading.Thread):
    """Runs body, keeping what it raised."""

    def __init__(self, body) -> None:
        super().__init__(name="holder", daemon=True)
        self.body = body
        self.error: Optional[BaseException] = None

    def run(self) -> None:
        try:
            self.body()
        except BaseException as e:  # noqa: B902 - kept for the test to judge
            self.error = e


if __name__ == "__main__":
    unittest.main()
