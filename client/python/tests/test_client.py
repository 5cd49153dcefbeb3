"""Tests of the Python client against a real gateway.

Run by scripts/test-clients.sh, which starts one and sets ZKGATE_URL:

    ZKGATE_URL=http://127.0.0.1:8080 python3 -m unittest discover -s client/python/tests -v
"""

from __future__ import annotations

import datetime
import json
import math
import os
import socket
import sys
import threading
import time
import unittest
import uuid
from typing import Dict, List, Optional, Tuple

# The client next to these tests, not one installed elsewhere.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import zkgate  # noqa: E402
from zkgate._errors import error_from  # noqa: E402

URL = os.environ.get("ZKGATE_URL")
if not URL:
    raise RuntimeError("ZKGATE_URL is not set: run scripts/test-clients.sh, which starts a gateway for these tests")

# Bounds of the waits in these tests: generous, since they only end a test that fails.
PATIENCE = 20.0


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def eventually(what: str, cond, within: float = PATIENCE) -> None:
    deadline = time.monotonic() + within
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {within}s: {what}")
        time.sleep(0.02)


def pipe(src: socket.socket, dst: socket.socket) -> None:
    """Copies what src sends to dst until src ends (or fails), then ends
    what dst is sent, as a proxy passes one direction of a connection on."""
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


class Proxy:
    """A TCP proxy to the gateway that can refuse connections or drop one reply,
    to test exactly the failures those cause."""

    def __init__(self, upstream: str) -> None:
        host_port = upstream.split("//", 1)[1].split("/", 1)[0]
        host, port = host_port.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.down = threading.Event()
        self.drop_next_reply = threading.Event()
        self.dropped = threading.Event()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.url = "http://127.0.0.1:%d" % self._listener.getsockname()[1]
        self._closed = False
        self._threads: List[threading.Thread] = []
        self._accept = threading.Thread(target=self._serve, daemon=True)
        self._accept.start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.down.is_set():
                client.close()
                continue
            t = threading.Thread(target=self._pipe, args=(client,), daemon=True)
            self._threads.append(t)
            t.start()

    def _pipe(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.upstream, timeout=PATIENCE)
        except OSError:
            client.close()
            return
        drop = self.drop_next_reply.is_set()
        if drop:
            self.drop_next_reply.clear()

        t = threading.Thread(target=pipe, args=(client, upstream), daemon=True)
        t.start()
        try:
            while True:
                data = upstream.recv(65536)
                if not data:
                    break
                if drop:
                    # The gateway has answered: lose the answer with the connection.
                    self.dropped.set()
                    break
                client.sendall(data)
        except OSError:
            pass
        finally:
            # shutdown, not just close: it wakes the other thread's recv and sends the FIN now.
            for s in (client, upstream):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            t.join(PATIENCE)
            client.close()
            upstream.close()

    def close(self) -> None:
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept
        except OSError:
            pass
        self._listener.close()
        self._accept.join(PATIENCE)
        for t in self._threads:
            t.join(PATIENCE)


class ClientTest(unittest.TestCase):
    def setUp(self) -> None:
        self.gate = zkgate.Gateway(URL)
        self.threads_before = {t.ident for t in threading.enumerate()}

    def tearDown(self) -> None:
        # Every keepalive thread a test started is gone when it ends.
        def keepalives() -> List[str]:
            return [t.name for t in threading.enumerate()
                    if t.name.startswith("zkgate-keepalive") and t.ident not in self.threads_before]

        eventually("no keepalive thread left: %s" % keepalives(), lambda: not keepalives())


class DurationTest(unittest.TestCase):
    def test_parse(self) -> None:
        self.assertEqual(zkgate.parse_duration("15s"), 15.0)
        self.assertEqual(zkgate.parse_duration("1h2m3.5s"), 3723.5)
        self.assertEqual(zkgate.parse_duration("500ms"), 0.5)
        self.assertEqual(zkgate.parse_duration("0"), 0.0)
        self.assertEqual(zkgate.parse_duration(2), 2.0)
        for bad in ["", "15", "s", "-1s", "1x", "1s2", ".s", True, None]:
            with self.assertRaises(zkgate.InvalidRequest, msg=repr(bad)):
                zkgate.parse_duration(bad)  # type: ignore[arg-type]

    def test_format(self) -> None:
        self.assertEqual(zkgate.format_duration(15), "15s")
        self.assertEqual(zkgate.format_duration(1.5), "1500ms")
        self.assertEqual(zkgate.format_duration(0), "0s")


class ErrorMappingTest(unittest.TestCase):
    """Codes the gateway answers when tokens are on or a limit is reached."""

    def test_by_code(self) -> None:
        cases = [
            (401, "unauthenticated", zkgate.Unauthenticated),
            (403, "forbidden", zkgate.Forbidden),
            (429, "too_many", zkgate.TooMany),
            (507, "queue_full", zkgate.QueueFull),
            (503, "unavailable", zkgate.Unavailable),
            (410, "lease_expired", zkgate.LeaseExpired),
            (409, "would_deadlock", zkgate.WouldDeadlock),
            (409, "deadlock", zkgate.Deadlock),
        ]
        for status, code, cls in cases:
            body = ('{"type":"urn:zkgate:problem:%s","title":"t","status":%d,"detail":"why","code":"%s","reason":"expired"}'
                    % (code, status, code)).encode()
            err = error_from(status, "application/problem+json", body, "3")
            self.assertIsInstance(err, cls)
            self.assertEqual((err.status, err.code, err.detail, err.retry_after), (status, code, "why", 3.0))
        self.assertIsInstance(error_from(410, "application/problem+json", b'{"code":"lease_expired"}', None),
                              zkgate.LeaseLost)

    def test_not_a_problem(self) -> None:
        err = error_from(502, "text/html", b"<html>bad gateway</html>", None)
        self.assertIsInstance(err, zkgate.Unavailable)
        self.assertIn("bad gateway", err.detail)
        err = error_from(418, "application/problem+json", b'{"code":"teapot","detail":"short and stout"}', None)
        self.assertEqual((type(err), err.code), (zkgate.ZkgateError, "teapot"))


class LeaseTest(ClientTest):
    def test_lease_is_revoked_at_the_end(self) -> None:
        with self.gate.lease(ttl="10s", holder="py-test") as lease:
            info = self.gate.lease_info(lease.id)
            self.assertEqual((info["holder"], info["ttl"]), ("py-test", "10s"))
            self.assertEqual(lease.ttl, 10.0)
        with self.assertRaises(zkgate.LeaseExpired) as cm:
            self.gate.lease_info(lease.id)
        self.assertEqual(cm.exception.reason, "revoked")
        self.assertFalse(lease.lost.is_set())
        lease.revoke()  # a second revoke is nothing

    def test_keepalive_outlives_the_ttl(self) -> None:
        with self.gate.lease(ttl="2s") as lease:
            # Three TTLs pass: the lease lives only if the thread kept it alive.
            self.assertFalse(lease.lost.wait(6.0), lease.error)
            self.assertEqual(self.gate.lease_info(lease.id)["id"], lease.id)
            lease.check()

    def test_lost_lease_is_raised_in_the_thread_that_uses_it(self) -> None:
        called = threading.Event()
        lease = self.gate.lease(ttl="3s", on_lost=lambda err: called.set())
        name = unique("held")
        waited: List[BaseException] = []
        with self.gate.lease() as other:
            other.lock(name)

            def wait_for_it() -> None:
                try:
                    lease.lock(name, wait="1m")
                except BaseException as e:
                    waited.append(e)

            waiter = threading.Thread(target=wait_for_it)
            waiter.start()
            eventually("the lease waits", lambda: len(self.gate.state("locks", name)[0]["waiters"]) == 1)
            zkgate.Gateway(URL)._call("DELETE", f"/v1/leases/{lease.id}")  # another client ends it
            # The wait under way ends with the lease, long before its minute.
            waiter.join(PATIENCE)
            self.assertFalse(waiter.is_alive())
            self.assertEqual([type(e) for e in waited], [zkgate.LeaseExpired])
        self.assertTrue(lease.lost.wait(PATIENCE), "the keepalive did not see the lease end")
        self.assertTrue(called.is_set())
        self.assertIsInstance(lease.error, zkgate.LeaseExpired)
        with self.assertRaises(zkgate.LeaseExpired):
            lease.check()
        with self.assertRaises(zkgate.LeaseLost):
            lease.lock(unique("lost"))
        with self.assertRaises(zkgate.LeaseLost):
            with lease:
                pass

    def test_lease_lost_while_unreachable(self) -> None:
        proxy = Proxy(URL)
        try:
            gate = zkgate.Gateway(proxy.url, retry_for=1.0)
            lease = gate.lease(ttl="2s")
            proxy.down.set()
            self.assertTrue(lease.lost.wait(PATIENCE))
            # No answer within the TTL: lost, though the gateway never said so.
            self.assertIs(type(lease.error), zkgate.LeaseLost)
            with self.assertRaises(zkgate.LeaseLost):
                lease.semaphore(unique("sem"), 1)
            with self.assertRaises(zkgate.LeaseLost):
                lease.revoke()
        finally:
            proxy.close()

    def test_short_outage_is_ridden_out(self) -> None:
        proxy = Proxy(URL)
        try:
            gate = zkgate.Gateway(proxy.url)
            with gate.lease(ttl="4s") as lease:
                proxy.down.set()
                # A keepalive fails (one is due every 1.33 s), then the gateway is back.
                self.assertFalse(lease.lost.wait(2.0))
                proxy.down.clear()
                self.assertFalse(lease.lost.wait(4.0), lease.error)
                self.assertEqual(self.gate.lease_info(lease.id)["id"], lease.id)
        finally:
            proxy.close()

    def test_unknown_lease(self) -> None:
        with self.assertRaises(zkgate.LeaseNotFound) as cm:
            self.gate.lease_info(str(uuid.uuid4()))
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "lease_not_found"))
        with self.assertRaises(zkgate.InvalidRequest) as cm2:
            self.gate.lease_info("not-a-lease-id")
        self.assertEqual(cm2.exception.status, 400)
        with self.assertRaises(zkgate.InvalidRequest):
            self.gate.lease(ttl="0.1s")  # below the gateway's 1s


class LeaseByIdTest(ClientTest):
    def test_a_lease_made_elsewhere_is_kept_alive_and_revoked_by_id(self) -> None:
        # Made by one client that does not keep it alive.
        made = zkgate.Gateway(URL)._call("POST", "/v1/leases", body={"ttl": "2s", "holder": "elsewhere"}).json()
        other = zkgate.Gateway(URL)
        lease = other.lease_by_id(made["id"])
        self.assertEqual((lease.id, lease.ttl, lease.deadline), (made["id"], 0.0, math.inf))
        self.assertEqual([t.name for t in threading.enumerate() if made["id"][:8] in t.name], [])
        # Kept alive by the other client past its TTL, by the lease and by its id.
        until = time.monotonic() + 3.0
        while time.monotonic() < until:
            self.assertEqual(lease.keepalive()["id"], made["id"])
            self.assertEqual(other.keepalive(made["id"])["holder"], "elsewhere")
            threading.Event().wait(0.4)  # a keepalive's pace, well within the TTL
        lease.check()
        # Every call acts for it: a claim acked, a lock held.
        q, name = unique("byid"), unique("byid")
        self.gate.produce(q, "x")
        item = lease.claim(q)
        self.assertIsNotNone(item)
        assert item is not None
        item.ack()
        lease.lock(name)
        holds = {(h["kind"], h["name"]) for h in self.gate.lease_info(made["id"])["holds"]}
        self.assertEqual(holds, {("lock", name)})
        # Revoked by the other client: what it held is free, the gateway says revoked.
        lease.revoke()
        with self.assertRaises(zkgate.LeaseExpired) as cm:
            self.gate.lease_info(made["id"])
        self.assertEqual(cm.exception.reason, "revoked")
        state, _ = self.gate.state("locks", name)
        self.assertEqual(state["holders"], [])
        with self.assertRaises(zkgate.LeaseExpired):
            lease.check()
        self.gate.delete_queue(q)

    def test_revoke_lease_by_id_ends_a_handle(self) -> None:
        made = zkgate.Gateway(URL)._call("POST", "/v1/leases", body={"ttl": "5s"}).json()
        lease = self.gate.lease_by_id(made["id"])
        self.gate.revoke_lease(made["id"])
        # The handle learns of the end from the gateway, at its next call.
        with self.assertRaises(zkgate.LeaseExpired) as cm:
            lease.claim(unique("byid"))
        self.assertEqual(cm.exception.reason, "revoked")
        self.assertTrue(lease.lost.is_set())
        with self.assertRaises(zkgate.LeaseExpired):
            self.gate.revoke_lease(made["id"])  # ended already
        with self.assertRaises(zkgate.InvalidRequest):
            self.gate.lease_by_id("../leases")


class LockTest(ClientTest):
    def test_lock_token_and_fence(self) -> None:
        name = unique("invoices")
        with self.gate.lease(ttl="10s") as a, self.gate.lease(ttl="10s") as b:
            with a.lock(name, wait="5s") as grant:
                self.assertGreater(grant.token, 0)
                self.assertEqual((grant.name, grant.mode), (name, "exclusive"))
                self.assertTrue(grant.is_current())
                with self.assertRaises(zkgate.Timeout) as cm:
                    b.lock(name)  # try once
                self.assertEqual(cm.exception.status, 409)
                self.assertEqual([h["lease"] for h in cm.exception.problem["holders"]], [a.id])
                # One lease is one holder: asking again through it is refused.
                with self.assertRaises(zkgate.AlreadyHeld):
                    a.lock(name)
            self.assertFalse(self.gate.fence(name, grant.token))
            with b.lock(name, wait="5s") as later:
                self.assertGreater(later.token, grant.token)

    def test_lock_all_is_all_or_nothing(self) -> None:
        x, y, w = unique("acct-x"), unique("acct-y"), unique("acct-w")
        with self.gate.lease(ttl="10s") as a, self.gate.lease(ttl="10s") as b:
            with a.lock_all([(y, "write"), x], wait="5s") as held:
                self.assertEqual([(g.name, g.mode) for g in held.grants], sorted([(x, "exclusive"), (y, "write")]))
                with self.assertRaises(zkgate.AlreadyHeld):
                    a.lock(x)
                # b's set, crossing a's, times out on the lock a holds, holding none of its own.
                with self.assertRaises(zkgate.Timeout) as cm:
                    b.lock_all([y, w, x], wait="300ms")
                self.assertIn(cm.exception.problem["lock"], (x, y))
                self.assertEqual(self.gate.state("locks", w)[0]["holders"], [])
            with b.lock_all([w, x, y], wait="5s") as later:
                self.assertEqual(len(later.grants), 3)
            with self.assertRaises(zkgate.InvalidRequest):
                a.lock_all([x, (x, "read")])
            with self.assertRaises(zkgate.InvalidRequest):
                a.lock_all([])

    def test_waiter_gets_the_lock_after_release_never_during(self) -> None:
        name = unique("serial")
        inside = 0
        most = 0
        mu = threading.Lock()
        errors: List[BaseException] = []

        def worker() -> None:
            nonlocal inside, most
            try:
                with self.gate.lease(ttl="10s") as lease:
                    for _ in range(3):
                        with lease.lock(name, wait="20s"):
                            with mu:
                                inside += 1
                                most = max(most, inside)
                            time.sleep(0.01)  # hold it a moment, so that an overlap would show
                            with mu:
                                inside -= 1
            except BaseException as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=worker) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(PATIENCE * 3)
        self.assertEqual(errors, [])
        self.assertEqual(most, 1)

    def test_read_write(self) -> None:
        name = unique("catalog")
        with self.gate.lease() as a, self.gate.lease() as b, self.gate.lease() as c:
            with a.lock(name, mode="read"), b.lock(name, mode="read"):
                state, index = self.gate.state("locks", name)
                self.assertEqual(len(state["holders"]), 2)
                self.assertGreater(index, 0)
                with self.assertRaises(zkgate.Timeout):
                    c.lock(name, mode="write")
            with c.lock(name, mode="write", wait="5s") as w:
                self.assertEqual(w.mode, "write")
            with self.assertRaises(zkgate.InvalidRequest):
                a.lock(name, mode="shared")

    def test_lost_reply_is_retried_to_the_same_grant(self) -> None:
        proxy = Proxy(URL)
        try:
            gate = zkgate.Gateway(proxy.url)
            name = unique("retried")
            with gate.lease(ttl="10s") as lease:
                proxy.drop_next_reply.set()
                grant = lease.lock(name, wait="5s")
                self.assertTrue(proxy.dropped.is_set(), "the proxy dropped no reply")
                state, _ = self.gate.state("locks", name)
                self.assertEqual([(h["lease"], h["token"]) for h in state["holders"]], [(lease.id, grant.token)])
                self.assertEqual(state["waiters"], [])
                grant.release()
        finally:
            proxy.close()

    def test_bad_names_are_refused_before_sending(self) -> None:
        with self.gate.lease() as lease:
            for bad in ["", ".", "..", "a/b", "x" * 201, "späße"]:
                with self.assertRaises(zkgate.InvalidRequest, msg=bad) as cm:
                    lease.lock(bad)
                self.assertIsNone(cm.exception.status)
                self.assertIsInstance(cm.exception, ValueError)


class ListTest(ClientTest):
    def test_lists_read_every_page(self) -> None:
        prefix = unique("paged")
        with self.gate.lease(ttl="10s", holder="pager") as lease:
            grants = [lease.lock(f"{prefix}-{i}") for i in range(5)]
            saved = zkgate._client._PAGE
            zkgate._client._PAGE = 2  # the gateway's pages, 2 long
            try:
                names = [lock["name"] for lock in self.gate.list("locks", prefix=prefix)]
                self.assertEqual(names, [f"{prefix}-{i}" for i in range(5)])
                first = [lock["name"] for lock in self.gate.list("locks", prefix=prefix, limit=3)]
                self.assertEqual(first, names[:3])
                self.assertIn(lease.id, [lea["id"] for lea in self.gate.leases()])
            finally:
                zkgate._client._PAGE = saved
            for g in grants:
                g.release()
        with self.assertRaises(zkgate.InvalidRequest):
            self.gate.list("nodes")
        with self.assertRaises(zkgate.InvalidRequest):
            self.gate.list("queues", prefix="x")


class SemaphoreTest(ClientTest):
    def test_slots(self) -> None:
        name = unique("gpu")
        with self.gate.lease() as a, self.gate.lease() as b, self.gate.lease() as c:
            with a.semaphore(name, 2) as s1, b.semaphore(name, 2) as s2:
                self.assertNotEqual(s1.token, s2.token)
                self.assertEqual(s1.limit, 2)
                with self.assertRaises(zkgate.Timeout):
                    c.semaphore(name, 2)
                with self.assertRaises(zkgate.LimitMismatch) as cm:
                    c.semaphore(name, 3)
                self.assertEqual(cm.exception.problem["limit"], 2)
            with c.semaphore(name, 2, wait="5s"):
                pass
            with self.assertRaises(zkgate.NotHeld):
                c.release("semaphore", name)


class ElectionTest(ClientTest):
    def test_campaign_proclaim_resign_observe(self) -> None:
        name = unique("scheduler")
        stop = threading.Event()
        seen: List[Optional[str]] = []
        changed = threading.Condition()

        def observer() -> None:
            for state in self.gate.observe(name, wait="2s", stop=stop):
                with changed:
                    leader = state["leader"]
                    seen.append(leader["value"] if leader else None)
                    changed.notify_all()

        with self.gate.lease() as a, self.gate.lease() as b:
            watcher = threading.Thread(target=observer)
            watcher.start()
            try:
                first = a.campaign(name, value="10.0.0.5:8080", wait="5s")
                self.assertTrue(first.elected)
                self.assertIsNotNone(first.token)
                second = b.campaign(name, value="10.0.0.6:8080")
                self.assertFalse(second.elected)
                self.assertEqual(second.position, 1)
                self.assertEqual(second.leader["lease"], a.id)
                with self.assertRaises(zkgate.NotLeader):
                    second.proclaim("me")
                first.proclaim("10.0.0.5:9090")
                with changed:
                    self.assertTrue(changed.wait_for(lambda: "10.0.0.5:9090" in seen, PATIENCE), seen)
                first.resign()
                again = b.campaign(name, value="10.0.0.6:8080", wait="5s")
                self.assertTrue(again.elected)
                self.assertGreater(again.token, first.token)
                with changed:
                    self.assertTrue(changed.wait_for(lambda: seen and seen[-1] == "10.0.0.6:8080", PATIENCE), seen)
                with again:
                    pass  # resigns
                with changed:
                    self.assertTrue(changed.wait_for(lambda: seen[-1] is None, PATIENCE), seen)
            finally:
                stop.set()
                watcher.join(PATIENCE)
        self.assertFalse(watcher.is_alive())


    def test_observe_skips_the_line(self) -> None:
        # Candidates joining and leaving behind the leader are no change of leader.
        name = unique("observed")
        with self.gate.lease() as a, self.gate.lease() as b, self.gate.lease() as c:
            leaders = self.gate.observe(name, wait="5s")
            self.assertIsNone(next(leaders)["leader"])
            first = a.campaign(name, value="a1")
            self.assertTrue(first.elected)
            self.assertEqual(next(leaders)["leader"]["value"], "a1")
            self.assertFalse(b.campaign(name, value="b").elected)
            self.assertFalse(c.campaign(name, value="c").elected)
            c.resign(name)
            first.proclaim("a2")
            state = next(leaders)
            self.assertEqual((state["leader"]["lease"], state["leader"]["value"]), (a.id, "a2"))
            self.assertEqual([x["lease"] for x in state["candidates"]], [a.id, b.id])
            first.resign()
            self.assertEqual(next(leaders)["leader"]["lease"], b.id)
            leaders.close()

    def test_lead(self) -> None:
        name = unique("led")
        with self.gate.lease() as a, self.gate.lease() as b:
            with a.lead(name, "a", round="1s") as led:
                self.assertTrue(led.elected)
                self.assertIsNotNone(led.token)
                # b waits in rounds; with a wait that passes first it gives up and leaves the line.
                with self.assertRaises(zkgate.Timeout):
                    b.lead(name, "b", round="200ms", wait="500ms")
                state, _ = self.gate.state("elections", name)
                self.assertEqual([x["lease"] for x in state["candidates"]], [a.id])
                got: List[zkgate.Campaign] = []
                waiter = threading.Thread(target=lambda: got.append(b.lead(name, "b", round="200ms")))
                waiter.start()
                eventually("b in line", lambda: len(self.gate.state("elections", name)[0]["candidates"]) == 2)
            waiter.join(PATIENCE)  # a resigned at the end of its block: b leads
            self.assertEqual(len(got), 1)
            self.assertTrue(got[0].elected)
            self.assertGreater(got[0].token, led.token)
            with self.assertRaises(zkgate.InvalidRequest):
                b.lead(name, round="0s")


class BarrierTest(ClientTest):
    def test_barrier(self) -> None:
        name = unique("deploy")
        self.gate.wait_barrier(name)  # never raised: down
        self.assertTrue(self.gate.raise_barrier(name))
        self.assertFalse(self.gate.raise_barrier(name))
        with self.assertRaises(zkgate.Timeout) as cm:
            self.gate.wait_barrier(name)
        self.assertTrue(cm.exception.problem["raised"])
        lowered = threading.Timer(0.2, self.gate.lower_barrier, args=(name,))
        lowered.start()
        self.gate.wait_barrier(name, wait="20s")
        lowered.join()
        self.assertFalse(self.gate.state("barriers", name)[0]["raised"])

    def test_double_barrier(self) -> None:
        name = unique("batch")
        results: List[object] = []
        # Both answers read, then leave: a member that leaves first deletes
        # its node, which the other's answer would not list.
        entered = threading.Barrier(2, timeout=PATIENCE)

        def member(tag: str) -> None:
            try:
                with self.gate.lease() as lease:
                    with lease.enter(name, count=2, member=tag, wait="20s") as m:
                        results.append(len(m.members))
                        entered.wait()
                    results.append("left")
            except BaseException as e:
                results.append(e)

        threads = [threading.Thread(target=member, args=(t,)) for t in ("host-a", "host-b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(PATIENCE * 2)
        self.assertEqual(sorted(map(str, results)), ["2", "2", "left", "left"])
        with self.gate.lease() as lease:
            with self.assertRaises(zkgate.Timeout) as cm:
                lease.enter(name, count=2)
            self.assertEqual(cm.exception.problem["count"], 2)
            with self.assertRaises(zkgate.CountMismatch):
                lease.enter(name, count=3)


class GroupTest(ClientTest):
    def test_group(self) -> None:
        name = unique("workers")
        self.assertEqual(self.gate.state("groups", name)[0]["members"], [])
        with self.gate.lease(holder="a") as a, self.gate.lease(holder="b") as b:
            with a.join(name, member="w1", value="10.0.0.1:80") as m:
                self.assertEqual(m.member, "w1")
                self.assertEqual(len(m.members), 1)
                a.join(name, member="w1", value="10.0.0.1:80")  # again: the same member
                with self.assertRaises(zkgate.InvalidRequest):
                    b.join(name, member="w1")
                other = b.join(name)
                self.assertEqual(other.member, b.id)
                state, index = self.gate.state("groups", name)
                self.assertEqual(sorted(x["member"] for x in state["members"]), sorted(["w1", b.id]))
                self.assertEqual([x["value"] for x in state["members"] if x["member"] == "w1"], ["10.0.0.1:80"])
                self.assertIn(name, [g["name"] for g in self.gate.list("groups")])
                other.leave()
                state, _ = self.gate.state("groups", name, index=index, wait="20s")
                self.assertEqual([x["member"] for x in state["members"]], ["w1"])
            with self.assertRaises(zkgate.NotHeld):
                a.leave_group(name, "w1")
        self.assertEqual(self.gate.state("groups", name)[0]["members"], [])


class QueueTest(ClientTest):
    def test_consume_acks_after_the_body_and_nacks_on_an_exception(self) -> None:
        q = unique("emails")
        for i in range(3):
            self.gate.produce(q, f"mail {i}")
        done: List[str] = []
        with self.gate.lease() as lease:
            with self.assertRaises(RuntimeError):
                for item in lease.consume(q, wait="0s", until_empty=True):
                    if item.text == "mail 1":
                        raise RuntimeError("cannot send mail 1")
                    done.append(item.text)
            # mail 1 was given back: it is served again, first.
            for item in lease.consume(q, wait="0s", until_empty=True):
                done.append(item.text)
        self.assertEqual(done, ["mail 0", "mail 1", "mail 2"])
        state, _ = self.gate.state("queues", q)
        self.assertEqual((state["length"], state["claimed"]), (0, 0))
        self.gate.delete_queue(q)

    def test_break_gives_the_item_back_unless_acked(self) -> None:
        q = unique("jobs")
        self.gate.produce(q, b"\x00\x01binary", priority=5)
        self.gate.produce(q, "second")
        with self.gate.lease() as lease:
            for item in lease.consume(q, wait="0s"):
                self.assertEqual((item.data, item.priority), (b"\x00\x01binary", 5))
                break
            for item in lease.consume(q, wait="0s"):
                self.assertEqual(item.data, b"\x00\x01binary")  # served again
                item.ack()
                break
            left = [i.text for i in lease.consume(q, wait="0s", until_empty=True)]
        self.assertEqual(left, ["second"])

    def test_take_claim_ack_nack(self) -> None:
        q = unique("work")
        self.assertIsNone(self.gate.take(q))
        made = self.gate.produce(q, "one")
        self.gate.produce(q, "two")
        taken = self.gate.take(q, wait="1s")
        assert taken is not None
        self.assertEqual((taken.id, taken.text), (made["id"], "one"))
        with self.gate.lease() as a, self.gate.lease() as b:
            claim = a.claim(q)
            assert claim is not None
            self.assertEqual(claim.text, "two")
            self.assertIsNone(b.claim(q))  # hidden from others
            with self.assertRaises(zkgate.NotClaimed):
                b.ack(q, claim.id)
            claim.nack()
            again = b.claim(q, wait="1s")
            assert again is not None
            self.assertEqual(again.id, claim.id)
            again.ack()
        self.assertIsNone(self.gate.take(q))
        got: List[Optional[zkgate.Item]] = []
        t = threading.Thread(target=lambda: got.append(self.gate.take(q, wait="20s")))
        t.start()
        self.gate.produce(q, "late")
        t.join(PATIENCE)
        self.assertEqual([i.text for i in got if i], ["late"])
        self.gate.delete_queue(q)

    def test_a_delayed_item_is_served_once_due(self) -> None:
        q = unique("later")
        made = self.gate.produce(q, "due", priority=3, delay="500ms")
        self.assertTrue(made["id"].startswith("due-"), made)
        due = datetime.datetime.fromisoformat(made["not_before"].replace("Z", "+00:00"))
        state, _ = self.gate.state("queues", q)
        if datetime.datetime.now(datetime.timezone.utc) < due:
            self.assertEqual((state["length"], state["delayed"]), (0, 1))
        item = self.gate.take(q, wait="20s")
        assert item is not None
        self.assertEqual((item.text, item.priority), ("due", 3))
        self.assertGreaterEqual(datetime.datetime.now(datetime.timezone.utc), due)
        at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(milliseconds=300)
        self.assertTrue(self.gate.produce(q, "at", not_before=at)["id"].startswith("due-"))
        item = self.gate.take(q, wait="20s")
        self.assertEqual(item.text if item else None, "at")
        with self.assertRaises(zkgate.InvalidRequest):
            self.gate.produce(q, "x", delay="1s", not_before=at)
        with self.assertRaises(zkgate.InvalidRequest):
            self.gate.produce(q, "x", delay="721h")
        self.gate.delete_queue(q)

    def test_consume_stops_on_a_lost_lease(self) -> None:
        q = unique("orphan")
        self.gate.produce(q, "x")
        lease = self.gate.lease(ttl="3s")
        with self.assertRaises(zkgate.LeaseExpired):
            for _ in lease.consume(q, wait="0s"):
                zkgate.Gateway(URL)._call("DELETE", f"/v1/leases/{lease.id}")
                self.assertTrue(lease.lost.wait(PATIENCE))
        # The claim ended with the lease: the item is served again.
        item = self.gate.take(q, wait="5s")
        self.assertEqual(item.text if item else None, "x")


class LoopbackServer:
    """An HTTP server on a loopback port, its requests answered by a handler
    class on a thread of their own until close; url and host_port say
    where it listens."""

    def serve(self, handler: type) -> None:
        import http.server

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.host_port = "127.0.0.1:%d" % self.server.server_address[1]
        self.url = "http://" + self.host_port
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stops serving: a connection to its address is refused from then on."""
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(PATIENCE)


class FakeGateway(LoopbackServer):
    """An HTTP server that answers a lease's creation with a promise and
    X-Zkgate-Lease-Ends of its choosing and every keepalive with a 503
    (a suspended ZooKeeper session), and records the revokes."""

    LEASE = "0b5c6f7e-1a2b-4c3d-8e9f-001122334455"

    def __init__(self, promise: float, drain: Optional[float]) -> None:
        import http.server

        fake = self
        self.keepalives = 0
        self.revoked = threading.Event()

        def stamp(t: float) -> str:
            return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%09dZ" % int((t % 1) * 1e9)

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def answer(self, status: int, body: bytes, ctype: str, headers: Dict[str, str]) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                now = time.time()
                if self.path == "/v1/leases":
                    headers = {"X-Zkgate-Time": stamp(now)}
                    if drain is not None:
                        headers["X-Zkgate-Lease-Ends"] = stamp(now + drain)
                    doc = {"id": fake.LEASE, "gateway": "g", "ttl": "1m", "holder": "h", "lock_delay": "0s",
                           "expires_at": stamp(now + promise), "created_at": stamp(now), "holds": []}
                    self.answer(201, json.dumps(doc).encode(), "application/json", headers)
                elif self.path == f"/v1/leases/{fake.LEASE}/keepalive":
                    fake.keepalives += 1
                    problem = {"type": "urn:zkgate:problem:unavailable", "title": "t", "status": 503,
                               "detail": "suspended", "code": "unavailable"}
                    self.answer(503, json.dumps(problem).encode(), "application/problem+json", {"Retry-After": "1"})
                else:
                    self.answer(404, b"{}", "application/json", {})

            def do_DELETE(self) -> None:
                if self.path == f"/v1/leases/{fake.LEASE}":
                    fake.revoked.set()
                self.answer(204, b"", "application/json", {})

        self.serve(Handler)


class FakeKeeper(LoopbackServer):
    """An HTTP server that plays one gateway of a handover: it answers a
    lease's creation, keepalives, lock acquires and releases, and revokes,
    records each request as (gateway, method, path), and with ``moved_to``
    set adds ``X-Zkgate-Lease-Moved-To`` to every answer about the lease, as
    a draining gateway does once the lease was handed over."""

    LEASE = "5d4c3b2a-1a2b-4c3d-8e9f-001122334455"

    def __init__(self, name: str, seen: List[tuple], promise: float = 1.5) -> None:
        import http.server

        fake = self
        self.moved_to: Optional[str] = None

        def stamp(t: float) -> str:
            return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%09dZ" % int((t % 1) * 1e9)

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def answer(self, status: int, doc: Optional[dict]) -> None:
                seen.append((name, self.command, self.path.split("?")[0]))
                body = json.dumps(doc).encode() if doc is not None else b""
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("X-Zkgate-Time", stamp(time.time()))
                if fake.moved_to and self.path != "/v1/leases":
                    self.send_header("X-Zkgate-Lease-Moved-To", fake.moved_to)
                self.end_headers()
                self.wfile.write(body)

            def lease_doc(self) -> dict:
                now = time.time()
                return {"id": fake.LEASE, "gateway": name, "ttl": "1m", "holder": "h", "lock_delay": "0s",
                        "expires_at": stamp(now + promise), "created_at": stamp(now), "holds": []}

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = self.path.split("?")[0]
                if path == "/v1/leases":
                    self.answer(201, self.lease_doc())
                elif path == f"/v1/leases/{fake.LEASE}/keepalive":
                    self.answer(200, self.lease_doc())
                elif path.endswith("/acquire"):
                    self.answer(200, {"name": path.split("/")[3], "mode": "exclusive", "lease": fake.LEASE,
                                      "token": 42, "node": "/zkgate/locks/x/_c_1-lock-0000000000",
                                      "acquired_at": stamp(time.time())})
                elif path.endswith("/release"):
                    self.answer(204, None)
                else:
                    self.answer(404, {})

            def do_DELETE(self) -> None:
                self.answer(204, None)

        self.serve(Handler)


class CounterTest(ClientTest):
    def test_counter(self) -> None:
        name = unique("hits")
        state, index = self.gate.counter(name)
        self.assertEqual((state["value"], state["version"]), (0, -1))
        self.assertEqual(self.gate.add_counter(name, 5)["value"], 5)
        self.assertEqual(self.gate.add_counter(name, -2)["value"], 3)
        changed = threading.Timer(0.2, self.gate.add_counter, args=(name, 1))
        changed.start()
        state, index = self.gate.counter(name)
        state, _ = self.gate.counter(name, index=index, wait="20s")
        changed.join()
        self.assertEqual(state["value"], 4)
        with self.assertRaises(zkgate.VersionMismatch) as cm:
            self.gate.set_counter(name, 10, version=0)
        self.assertEqual((cm.exception.problem["value"], cm.exception.problem["version"]), (4, 2))
        self.assertEqual(self.gate.set_counter(name, 10, version=2)["version"], 3)
        shared = unique("shared")
        self.assertEqual(self.gate.set_counter(shared, 2**31 - 1, format="int32")["format"], "int32")
        with self.assertRaises(zkgate.FormatMismatch):
            self.gate.counter(shared)
        with self.assertRaises(zkgate.FormatMismatch):
            self.gate.set_counter(shared, 1)  # never over bytes of another format
        with self.assertRaises(zkgate.OutOfRange):
            self.gate.add_counter(shared, 1, format="int32")
        self.gate.delete_counter(shared)
        with self.assertRaises(zkgate.InvalidRequest):
            self.gate.counter(name, format="hex")
        self.assertIn(name, [c["name"] for c in self.gate.list("counters")])
        self.gate.delete_counter(name)
        self.assertEqual(self.gate.counter(name)[0]["version"], -1)


class HandoverTest(unittest.TestCase):
    """A lease's calls follow X-Zkgate-Lease-Moved-To, and come back to the
    gateway's URL when the gateway it names refuses the connection."""

    def test_calls_follow_the_lease_and_fall_back(self) -> None:
        seen: List[tuple] = []

        def calls(since: int = 0) -> List[tuple]:
            """What was seen since then, less the background keepalives."""
            return [c for c in seen[since:] if not c[2].endswith("/keepalive")]

        draining = FakeKeeper("draining", seen)
        keeper = FakeKeeper("keeper", seen)
        try:
            lease = zkgate.Gateway(draining.url).lease(ttl="1m")
            self.assertEqual(lease.url, draining.url)
            draining.moved_to = keeper.url
            grant = lease.lock("x")
            self.assertEqual(lease.url, keeper.url)
            self.assertEqual(calls()[-1], ("draining", "POST", "/v1/locks/x/acquire"))
            grant.release()
            self.assertEqual(calls()[-1], ("keeper", "POST", "/v1/locks/x/release"))
            # The keepalives (a third of the way to a promise of 1.5s) follow too.
            eventually("a keepalive reaches the keeper",
                       lambda: ("keeper", "POST", f"/v1/leases/{FakeKeeper.LEASE}/keepalive") in seen)
            # The keeper goes away: the lease's calls go to the gateway's URL
            # again, which passes them on (here: answers them).
            draining.moved_to = None
            keeper.close()
            n = len(seen)
            lease.lock("y").release()
            self.assertEqual(lease.url, draining.url)
            self.assertEqual(calls(n), [("draining", "POST", "/v1/locks/y/acquire"),
                                        ("draining", "POST", "/v1/locks/y/release")])
            n = len(seen)
            eventually("a keepalive reaches the gateway's URL again",
                       lambda: ("draining", "POST", f"/v1/leases/{FakeKeeper.LEASE}/keepalive") in seen[n:])
            self.assertFalse(lease.lost.is_set(), f"the lease was lost: {lease.error}")
            # A keepalive thread that finds the keeper gone falls back by itself.
            keeper2 = FakeKeeper("keeper2", seen)
            draining.moved_to = keeper2.url
            lease.keepalive()
            self.assertEqual(lease.url, keeper2.url)
            draining.moved_to = None
            keeper2.close()
            n = len(seen)
            eventually("the keepalive thread falls back to the gateway's URL",
                       lambda: ("draining", "POST", f"/v1/leases/{FakeKeeper.LEASE}/keepalive") in seen[n:])
            self.assertEqual(lease.url, draining.url)
            self.assertFalse(lease.lost.is_set(), f"the lease was lost: {lease.error}")
            draining.moved_to = "ftp://elsewhere"  # not a gateway's URL: ignored
            lease.keepalive()
            self.assertEqual(lease.url, draining.url)
            lease.revoke()
            self.assertEqual(calls()[-1], ("draining", "DELETE", f"/v1/leases/{FakeKeeper.LEASE}"))
        finally:
            draining.close()


def unanswered_address() -> Tuple[str, socket.socket, List[socket.socket]]:
    """A loopback address whose connection attempts go unanswered (a full
    accept queue drops them), as to an address out of reach; with the
    sockets to close at the end."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fill = []
    for _ in range(3):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        fill.append(s)
    return "http://127.0.0.1:%d" % port, listener, fill


class UnreachableKeeperTest(unittest.TestCase):
    def test_a_keeper_out_of_reach_is_left_within_the_deadline(self) -> None:
        # A promise of 6s: a keepalive every 2s, which an unanswered
        # connection attempt left to the system would outlast.
        seen: List[tuple] = []
        draining = FakeKeeper("draining", seen, promise=6.0)
        address, listener, fill = unanswered_address()
        try:
            lease = zkgate.Gateway(draining.url).lease(ttl="1m")
            draining.moved_to = address
            grant = lease.lock("x")
            draining.moved_to = None
            self.assertEqual(lease.url, address)
            grant.release()
            lease.lock("y").release()
            self.assertEqual(lease.url, draining.url)
            self.assertFalse(lease.lost.is_set(), f"the lease was lost: {lease.error}")
            self.assertIn(("draining", "POST", "/v1/locks/y/acquire"), seen)
            lease.revoke()
        finally:
            draining.close()
            for s in fill + [listener]:
                s.close()


class DeadlineTest(ClientTest):
    """The lease ends where the gateway's promise ends, not at its TTL."""

    def test_deadline_follows_expires_at(self) -> None:
        with self.gate.lease(ttl="30s") as lease:
            # The gateway promises what its ZooKeeper session is known to keep:
            # under its session timeout (10s here), whatever the TTL.
            first = lease.deadline
            self.assertLess(first - time.monotonic(), 10.0)
            self.assertGreater(first - time.monotonic(), 0.0)
            eventually("a keepalive moves the deadline", lambda: lease.deadline > first)
            self.assertLess(lease.deadline - time.monotonic(), 10.0)

    def test_lease_ends_at_its_deadline_when_unreachable(self) -> None:
        proxy = Proxy(URL)
        try:
            called = threading.Event()
            gate = zkgate.Gateway(proxy.url, retry_for=1.0)
            lease = gate.lease(ttl="30s", on_lost=lambda err: called.set())
            asked = time.monotonic()
            proxy.down.set()
            # Past the deadline (and a scheduling allowance), the lease has ended.
            eventually("the deadline passes", lambda: time.monotonic() > lease.deadline + 0.5)
            self.assertTrue(lease.lost.is_set(), "the lease outlived its deadline")
            self.assertLess(lease.deadline - asked, 10.0, "the lease lived as if its TTL of 30s counted")
            self.assertTrue(called.is_set())
            self.assertIs(type(lease.error), zkgate.LeaseLost)
            self.assertIn("no keepalive", str(lease.error))
            self.assertIn("confirmed before the deadline", str(lease.error))
            with self.assertRaises(zkgate.LeaseLost):
                lease.check()
            # The client revokes the lease at the gateway once it can.
            proxy.down.clear()

            def revoked() -> bool:
                try:
                    self.gate.lease_info(lease.id)
                    return False
                except zkgate.LeaseExpired as e:
                    return e.reason == "revoked"

            eventually("the lease is revoked at the gateway", revoked)
            with self.assertRaises(zkgate.LeaseLost):
                lease.revoke()
        finally:
            proxy.close()

    def test_unavailable_confirms_nothing_and_the_drain_ends_it(self) -> None:
        # A promise of 30s cut short by a drain ending in 1.5s; every keepalive
        # answered 503. The lease ends with the drain, and is revoked.
        fake = FakeGateway(promise=30.0, drain=1.5)
        try:
            gate = zkgate.Gateway(fake.url)
            asked = time.monotonic()
            lease = gate.lease(ttl="1m")
            self.assertLess(lease.deadline - asked, 1.5 + 0.5)
            self.assertTrue(lease.lost.wait(PATIENCE), "a drain's end and 503 keepalives did not end the lease")
            self.assertGreaterEqual(time.monotonic(), lease.deadline)
            self.assertGreater(fake.keepalives, 0)
            self.assertTrue(fake.revoked.wait(PATIENCE), "the expired lease was not revoked")
        finally:
            fake.close()
        fake = FakeGateway(promise=1.5, drain=None)
        try:
            lease = zkgate.Gateway(fake.url).lease(ttl="1m")
            self.assertTrue(lease.lost.wait(PATIENCE), "503 keepalives kept the lease past its promise")
            self.assertTrue(fake.revoked.wait(PATIENCE))
        finally:
            fake.close()

    def test_lock_delay(self) -> None:
        with self.gate.lease(ttl="10s", lock_delay="2s") as lease:
            self.assertEqual(lease.lock_delay, 2.0)
            self.assertEqual(self.gate.lease_info(lease.id)["lock_delay"], "2s")
        with self.assertRaises(zkgate.InvalidRequest):
            self.gate.lease(lock_delay="2h")  # above the gateway's --max-lock-delay


class OneHolderTest(ClientTest):
    """The gateway answers a lease's repeated acquire with the same grant: a
    lease is one holder, and the client says so."""

    def concurrently(self, n: int, fn) -> List[Optional[BaseException]]:
        start = threading.Barrier(n)
        out: List[Optional[BaseException]] = [None] * n

        def run(i: int) -> None:
            start.wait()
            try:
                fn()
            except BaseException as e:
                out[i] = e

        threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(PATIENCE)
        return out

    def assert_one_holder(self, what: str, errors: List[Optional[BaseException]]) -> None:
        self.assertEqual(sum(e is None for e in errors), 1, errors)
        for e in errors:
            if e is not None:
                self.assertIsInstance(e, zkgate.AlreadyHeld)
                self.assertIn(f"already holds (or is acquiring) {what}", str(e))
                self.assertIn("one lease is one holder; take a lease per concurrent holder", str(e))

    def test_concurrent_acquires_through_one_lease(self) -> None:
        name = unique("invoices")
        with self.gate.lease(ttl="10s") as lease:
            grants: List[zkgate.Grant] = []
            self.assert_one_holder(f"lock {name!r}", self.concurrently(8, lambda: grants.append(
                lease.lock(name, wait="5s"))))
            state, _ = self.gate.state("locks", name)
            self.assertEqual([h["token"] for h in state["holders"]], [grants[0].token])
            grants[0].release()
            with lease.lock(name) as again:  # free again after the release
                self.assertGreater(again.token, grants[0].token)
            sem = unique("gpu")
            self.assert_one_holder(f"semaphore {sem!r}", self.concurrently(4, lambda: lease.semaphore(sem, 3, wait="5s")))
            lease.release("semaphore", sem)
            lease.semaphore(sem, 3).release()
            election = unique("scheduler")
            self.assert_one_holder(f"election {election!r}",
                                   self.concurrently(4, lambda: lease.campaign(election, wait="5s")))
            lease.resign(election)
            lease.campaign(election).resign()

    def test_failed_acquire_frees_the_name(self) -> None:
        name = unique("busy")
        with self.gate.lease() as holder, self.gate.lease() as lease:
            holder.lock(name)
            for _ in range(2):
                with self.assertRaises(zkgate.Timeout):
                    lease.lock(name)


if __name__ == "__main__":
    unittest.main()
