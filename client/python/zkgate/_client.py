"""The gateway, its leases, and what a lease can hold."""

from __future__ import annotations

import datetime
import http.client
import json
import math
import os
import random
import re
import socket
import ssl
import threading
import time
import urllib.parse
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Set, Tuple, TypeVar, Union

from ._errors import (
    AlreadyHeld,
    InvalidRequest,
    LeaseExpired,
    LeaseLost,
    NotClaimed,
    NotHeld,
    Timeout,
    TooMany,
    TransportError,
    Unavailable,
    Unreachable,
    ZkgateError,
    error_from,
)

__version__ = "0.1.0"

Duration = Union[str, int, float, datetime.timedelta]
"""A Go duration string (``"500ms"``, ``"15s"``, ``"2m"``), or seconds, or a timedelta."""

DEFAULT_URL = "http://127.0.0.1:8080"
DEFAULT_CONNECT_RETRIES = 3
_MAX_RETRY_AFTER = 5.0  # the longest pause a Retry-After is followed for
_MIN_KEEPALIVE = 0.1  # the shortest time between keepalives, however near the deadline
# The bound of a connection to a gateway other than this one's URL (a lease's
# keeper, named by X-Zkgate-Lease-Moved-To): its address may be out of reach
# (a gateway's own address, behind a load balancer), where a connection
# attempt can go unanswered for minutes; the call goes to the URL instead.
_MOVED_CONNECT_TIMEOUT = 2.0
KINDS = ("locks", "semaphores", "elections", "barriers", "double-barriers", "queues", "groups",
         "counters")

# How a counter's znode holds its value (see Gateway.counter).
COUNTER_FORMATS = ("decimal", "int32", "int64")

# How many items a list asks for a page: the most a gateway gives.
_PAGE = 1000

_NAME = re.compile(r"[A-Za-z0-9._-]{1,200}")
# A W3C traceparent: version, trace id, parent id, flags (a later version may add more after a dash).
_TRACEPARENT = re.compile(r"(?!ff)[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-[\x21-\x7e]*)?")
_TRACESTATE = re.compile(r"[\x20-\x7e]{0,512}")
_DURATION_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def _trace_context(given: Optional[Mapping[str, str]]) -> Dict[str, str]:
    """The W3C trace headers of ``given`` (a trace_headers hook's answer)
    that may be sent: a sane traceparent, and its tracestate."""
    got = {k.lower(): v for k, v in (given or {}).items() if isinstance(k, str) and isinstance(v, str)}
    parent = got.get("traceparent", "")
    if not _TRACEPARENT.fullmatch(parent):
        return {}
    out = {"traceparent": parent}
    state = got.get("tracestate", "")
    if state and _TRACESTATE.fullmatch(state):
        out["tracestate"] = state
    return out


def parse_duration(d: Duration) -> float:
    """Seconds of a duration: a Go duration string, a number of seconds, or a timedelta."""
    if isinstance(d, datetime.timedelta):
        secs = d.total_seconds()
    elif isinstance(d, bool):
        raise InvalidRequest(f"bad duration {d!r}")
    elif isinstance(d, (int, float)):
        secs = float(d)
    elif isinstance(d, str):
        s = d.strip()
        if s == "0":
            return 0.0
        secs, pos = 0.0, 0
        for m in _DURATION_PART.finditer(s):
            if m.start() != pos or m.group(1) in ("", "."):
                break
            secs += float(m.group(1)) * _UNIT[m.group(2)]
            pos = m.end()
        if pos == 0 or pos != len(s):
            raise InvalidRequest(f'bad duration {d!r}: want a Go duration such as "500ms", "15s" or "2m"')
    else:
        raise InvalidRequest(f"bad duration {d!r}")
    if secs < 0 or secs != secs:
        raise InvalidRequest(f"bad duration {d!r}: it must not be negative")
    return secs


def format_duration(secs: float) -> str:
    """A Go duration string for seconds, to the millisecond."""
    ms = int(round(secs * 1000))
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def _wire_duration(d: Duration) -> Tuple[str, float]:
    """The duration as sent (a string is sent as given, once checked) and in seconds."""
    secs = parse_duration(d)
    return (d.strip() if isinstance(d, str) else format_duration(secs)), secs


def _backoff(attempt: int) -> float:
    """The pause before retry ``attempt + 1``: 100 ms doubling to 2 s, with
    jitter (half to all of it) so that many clients do not retry in step."""
    d = min(0.1 * 2 ** min(attempt, 5), 2.0)
    return d / 2 + random.uniform(0, d / 2)


def gateway_url(url: Optional[str] = None) -> str:
    """The gateway URL a client uses: ``url``, else ``$ZKGATE_URL``, else
    DEFAULT_URL (empty counts as unset); ``host:port`` means
    ``http://host:port``. The Go and Node clients read it the same way."""
    u = (url or "").strip() or os.environ.get("ZKGATE_URL", "").strip() or DEFAULT_URL
    return u if "://" in u else "http://" + u


def _format_query(fmt: Optional[str]) -> Dict[str, str]:
    """?format= of a counter's call ({} for the gateway's default, decimal)."""
    if fmt is None:
        return {}
    if fmt not in COUNTER_FORMATS:
        raise InvalidRequest(f"bad counter format {fmt!r}: one of {', '.join(COUNTER_FORMATS)}")
    return {"format": fmt}


def _name(name: str) -> str:
    """The name, path-escaped, once it is one the gateway accepts."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name in (".", ".."):
        raise InvalidRequest(f"bad name {name!r}: 1 to 200 characters of [A-Za-z0-9._-], not . or ..")
    return urllib.parse.quote(name, safe="")


_RFC3339 = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)", re.IGNORECASE)


def _rfc3339(value: Optional[str]) -> Optional[float]:
    """Seconds since the epoch of an RFC 3339 time (nanoseconds and all), or None."""
    m = _RFC3339.fullmatch((value or "").strip())
    if not m:
        return None
    base = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    secs = base.timestamp() + (float(m.group(2)) if m.group(2) else 0.0)
    zone = m.group(3).upper()
    if zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        secs -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    return secs


class _Reply:
    __slots__ = ("status", "headers", "body", "sent")

    def __init__(self, status: int, headers: http.client.HTTPMessage, body: bytes, sent: float = 0.0) -> None:
        self.status = status
        self.headers = headers
        self.body = body
        self.sent = sent  # time.monotonic() when its request was sent

    def json(self) -> Any:
        try:
            return json.loads(self.body.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise TransportError(f"the gateway answered {self.status} with a body that is not JSON: {e}") from e


class _NotConnected(TransportError):
    """No connection to the gateway: the request was not sent."""


class _Target:
    """Where requests go: a gateway's base URL, taken apart."""

    __slots__ = ("url", "https", "host", "port", "base")

    def __init__(self, url: str) -> None:
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname or u.query or u.fragment or u.username:
            raise ValueError(f"not a gateway URL: {url!r}")
        self.url = url.rstrip("/")
        self.https = u.scheme == "https"
        self.host = u.hostname
        self.port = u.port
        self.base = u.path.rstrip("/")


class Stop(threading.Event):
    """A ``threading.Event`` that, once set, also cuts off the requests in
    flight that it stops: a ``watch`` or ``observe`` given it as ``stop``
    ends at once, even in a read blocked on a gateway that has stopped
    answering (a plain Event is checked between reads). ``lease.lost`` is
    one, so that the lease's end stops whatever follows it on time."""

    def __init__(self) -> None:
        super().__init__()
        self._cut_mu = threading.Lock()
        self._socks: Set[socket.socket] = set()

    def set(self) -> None:
        with self._cut_mu:
            super().set()
            socks = list(self._socks)
        # A shutdown wakes a read blocked on the connection at once; the
        # plain socket's, also under TLS, so that the reading thread keeps
        # its TLS state and fails as on a closed connection.
        for sock in socks:
            try:
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                pass

    def _track(self, sock: socket.socket) -> bool:
        """Counts a connection in flight, to be cut off when this is set;
        False if it is set already."""
        with self._cut_mu:
            if self.is_set():
                return False
            self._socks.add(sock)
            return True

    def _untrack(self, sock: socket.socket) -> None:
        with self._cut_mu:
            self._socks.discard(sock)


class Gateway:
    """A zkgate gateway.

    ``url`` defaults to ``$ZKGATE_URL``, then ``http://127.0.0.1:8080``
    (``host:port`` means ``http://host:port``); ``token`` to
    ``$ZKGATE_TOKEN`` (sent as ``Authorization: Bearer``; ``""`` sends
    none). ``timeout`` is how long the client waits for an answer beyond
    the server-side ``wait`` of the call; ``retry_for`` how long (beyond the
    ``wait``) it retries a call that is safe to repeat when the gateway is
    unavailable (503, 429, a connection lost after the request was sent).
    A call that cannot connect at all is tried ``connect_retries`` times
    more, within that time, then raises ``Unreachable``.

    ``trace_headers``, when given, is called for every request and returns
    the caller's W3C trace context as headers (``traceparent`` and
    ``tracestate``; any other key is ignored), so that the gateway's spans of
    the call join the application's trace. With OpenTelemetry::

        from opentelemetry.propagate import inject

        def trace_headers():
            carrier = {}
            inject(carrier)
            return carrier

        gw = zkgate.Gateway(trace_headers=trace_headers)

    A ``traceparent`` not of the W3C form is not sent.
    """

    def __init__(
        self,
        url: Optional[str] = None,
        token: Optional[str] = None,
        *,
        timeout: float = 10.0,
        retry_for: float = 10.0,
        connect_retries: int = DEFAULT_CONNECT_RETRIES,
        ssl_context: Optional[ssl.SSLContext] = None,
        trace_headers: Optional[Callable[[], Mapping[str, str]]] = None,
    ) -> None:
        url = gateway_url(url)
        try:
            self._target = _Target(url)
        except ValueError:
            raise InvalidRequest(f"bad gateway URL {url!r}: want http://host:port") from None
        self.url = url.rstrip("/")
        self.token = token if token is not None else (os.environ.get("ZKGATE_TOKEN") or None)
        self.timeout = float(timeout)
        self.retry_for = float(retry_for)
        self.connect_retries = max(int(connect_retries), 0)
        self._ssl = ssl_context
        self._trace_headers = trace_headers

    def __repr__(self) -> str:
        return f"Gateway({self.url!r})"

    # -- HTTP ----------------------------------------------------------------

    def _send(
        self,
        method: str,
        path: str,
        query: Optional[Mapping[str, str]],
        body: Optional[bytes],
        content_type: str,
        timeout: float,
        to: Optional[_Target] = None,
        cut: Optional[Stop] = None,
    ) -> _Reply:
        """One HTTP exchange on a connection of its own (so that no answer is
        ever read from a connection the gateway closed meanwhile), with the
        gateway at ``to`` (default: this one's URL). No connection at all is
        _NotConnected: nothing was sent. The exchange is cut off (a
        TransportError) when ``cut`` is set: a read that hangs on a frozen
        gateway keeps nobody past a lease's end or a watch's stop."""
        to = to or self._target
        sock: Optional[socket.socket] = None
        target = to.base + path
        if query:
            target += "?" + urllib.parse.urlencode(query)
        headers = {"Accept": "application/json", "User-Agent": f"zkgate-python/{__version__}"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if body is not None:
            headers["Content-Type"] = content_type
        if self._trace_headers is not None:
            headers.update(_trace_context(self._trace_headers()))
        conn: http.client.HTTPConnection
        connect = timeout if to is self._target else min(timeout, _MOVED_CONNECT_TIMEOUT)
        if to.https:
            conn = http.client.HTTPSConnection(to.host, to.port, timeout=connect, context=self._ssl)
        else:
            conn = http.client.HTTPConnection(to.host, to.port, timeout=connect)
        try:
            try:
                conn.connect()
            except OSError as e:
                raise _NotConnected(f"{method} {to.url}{path}: {e or type(e).__name__}") from e
            sock = conn.sock
            if sock is not None:
                sock.settimeout(timeout)
                if cut is not None and not cut._track(sock):
                    raise TransportError(f"{method} {to.url}{path}: not sent, stopped")
            sent = time.monotonic()
            conn.request(method, target, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            return _Reply(resp.status, resp.headers, data, sent)
        except (OSError, http.client.HTTPException) as e:
            raise TransportError(f"{method} {to.url}{path}: {e or type(e).__name__}") from e
        finally:
            if cut is not None and sock is not None:
                cut._untrack(sock)
            conn.close()

    def _call(
        self,
        method: str,
        path: str,
        *,
        query: Optional[Dict[str, str]] = None,
        body: Any = None,
        raw: Optional[bytes] = None,
        wait: Optional[Duration] = None,
        safe: bool = False,
        done_on_retry: Tuple[type, ...] = (),
        lease: Optional["Lease"] = None,
        via: Optional["Lease"] = None,
        stop: Optional[threading.Event] = None,
        grant: bool = False,
    ) -> _Reply:
        """A call, retried with backoff until ``wait`` plus ``retry_for`` has
        passed: whatever the call, when it found no connection (nothing was
        sent; Unreachable once ``connect_retries`` retries found none either)
        or was answered 429; and while it is ``safe`` to repeat (idempotent
        on the gateway), when the connection broke after it was sent or the
        answer was 503. A ``wait`` is sent as ``?wait=``, shortened on each
        retry so that the whole call stays within it. An error of a class in
        ``done_on_retry`` answering a retry means that the first attempt did
        the work. A call made for a lease (``lease``, or ``via`` for one that
        may have ended) goes where the lease moved (see ``Lease.url``). A call
        for a lease ends with its LeaseLost when the lease ends, and one with
        a ``stop`` that is a Stop with a TransportError when it is set, even
        in flight. A ``grant`` (an acquire, a campaign, a claim, an enter)
        answered as or after its lease ended raises the LeaseLost instead of
        its answer: what it granted is the lease's and ends with it at the
        gateway, so the caller must not act on it."""
        cut = lease.lost if lease is not None else (stop if isinstance(stop, Stop) else None)
        via = via or lease
        query = dict(query or {})
        wait_secs = 0.0
        if wait is not None:
            wire, wait_secs = _wire_duration(wait)
            query["wait"] = wire
        data, ctype = raw, "application/octet-stream"
        if body is not None:
            data, ctype = json.dumps(body).encode("utf-8"), "application/json"
        start = time.monotonic()
        deadline = start + wait_secs + self.retry_for
        attempt, dials = 0, 0
        unknown = False  # an earlier attempt may have done the work
        while True:
            if lease is not None:
                lease.check()
            left = max(0.0, wait_secs - (time.monotonic() - start))
            if wait is not None and attempt > 0:
                query["wait"] = format_duration(left)
            to = via._moved_to() if via is not None else None
            try:
                reply = self._send(method, path, query, data, ctype, left + self.timeout, to, cut)
                if via is not None:
                    via._heard(reply)
                if reply.status >= 400:
                    raise error_from(reply.status, reply.headers.get("Content-Type", ""), reply.body,
                                     reply.headers.get("Retry-After"))
                if grant and lease is not None:
                    lease.check()  # the clock too: the deadline thread may not have run yet
                return reply
            except (TransportError, Unavailable, TooMany) as e:
                if lease is not None and lease.error is not None:
                    raise lease.error from e  # the lease ended: its end cut the call off
                if stop is not None and stop.is_set():
                    raise
                failure: ZkgateError = e
                if isinstance(e, _NotConnected):
                    if to is not None and via is not None:
                        via._unreachable(to)  # nothing was sent: this URL passes it on
                        continue
                    # Nothing was sent, so any call may be tried again: a few
                    # times, since a gateway that is down should be told at once;
                    # for a lease, while it is known to live (its gateway is on
                    # its way back, or another takes its requests).
                    dials += 1
                    failure = Unreachable(f"no connection to the gateway at {self.url} in {dials} attempts: {e}")
                    failure.__cause__ = e
                    pause = _backoff(attempt)
                    lives = lease is not None and math.isfinite(lease.deadline) and time.monotonic() + pause < lease.deadline
                    if dials > self.connect_retries and not lives:
                        raise failure from e
                elif not (safe or isinstance(e, TooMany)):
                    raise  # a 429 was refused before any work; the others may have been done
                pause = _backoff(attempt)
                if e.retry_after is not None:
                    pause = max(pause, min(e.retry_after, _MAX_RETRY_AFTER))
                if time.monotonic() + pause > deadline:
                    if failure is e:
                        raise
                    raise failure from e
                unknown = unknown or (failure is e and not isinstance(e, TooMany))
                if lease is not None:
                    if lease.lost.wait(pause):
                        lease.check()
                else:
                    time.sleep(pause)
                attempt += 1
            except ZkgateError as e:
                if lease is not None and isinstance(e, LeaseLost):
                    lease._lose(e)
                if unknown and isinstance(e, done_on_retry):
                    return _Reply(204, http.client.HTTPMessage(), b"")
                raise

    # -- leases --------------------------------------------------------------

    def lease(
        self,
        ttl: Duration = "15s",
        holder: Optional[str] = None,
        *,
        lock_delay: Optional[Duration] = None,
        on_lost: Optional[Callable[[LeaseLost], None]] = None,
    ) -> "Lease":
        """Creates a lease and keeps it alive on a background thread until it
        is revoked (``with gate.lease() as lease:`` revokes it at the end).
        One lease per concurrent holder: a lease is one holder of each name.
        ``ttl`` is how long the gateway keeps the lease if this client goes
        silent; ``lease.deadline`` is how long it is certainly kept, often
        sooner. ``lock_delay``: when the lease ends without releasing what it
        holds, nobody is granted it for that long (default: the gateway's
        ``--lock-delay``). ``on_lost`` is called, on a thread of the lease,
        if the lease is lost."""
        body: Dict[str, Any] = {"ttl": _wire_duration(ttl)[0]}
        if holder is not None:
            body["holder"] = holder
        if lock_delay is not None:
            body["lock_delay"] = _wire_duration(lock_delay)[0]
        reply = self._call("POST", "/v1/leases", body=body)
        return Lease(self, reply.json(), on_lost, reply.sent, reply.headers)

    def lease_by_id(self, lease_id: str) -> "Lease":
        """A lease made elsewhere, by its id, for acting for it: its claims,
        acks, locks, releases, ``keepalive()`` and ``revoke()``. This client
        does not keep it alive (someone else does, or it is short-lived) and
        knows nothing of its deadline: ``deadline`` is ``math.inf``, ``ttl``
        0, and it ends here only when the gateway says so (410, 404) or by
        ``revoke()``. Sends nothing until it is used."""
        _name(lease_id)  # the id goes into the lease's paths as it is
        return Lease(self, {"id": lease_id}, kept=False)

    def keepalive(self, lease_id: str) -> Dict[str, Any]:
        """Extends the lease ``lease_id`` once, for a client that keeps a lease
        alive itself (``gate.lease()`` keeps its own)."""
        return self._call("POST", f"/v1/leases/{urllib.parse.quote(lease_id, safe='')}/keepalive", safe=True).json()

    def revoke_lease(self, lease_id: str) -> None:
        """Ends the lease ``lease_id``: everything it holds is released before
        this returns. A lease that ended already raises LeaseExpired (reason
        ``revoked``, ``expired``...), unless it was this call's own first
        attempt that ended it."""
        self._call("DELETE", f"/v1/leases/{urllib.parse.quote(lease_id, safe='')}", safe=True, done_on_retry=(LeaseExpired,))

    def lease_info(self, lease_id: str) -> Dict[str, Any]:
        """The lease and what it holds (``GET /v1/leases/{id}``)."""
        return self._call("GET", f"/v1/leases/{urllib.parse.quote(lease_id, safe='')}", safe=True).json()

    def leases(self, *, limit: Optional[int] = None) -> List[Dict[str, Any]]:
        """The live leases of every gateway, oldest first, read a page at a
        time (at most ``limit`` of them, if given)."""
        return self._pages("leases", {}, limit)

    def list(self, kind: str, *, prefix: Optional[str] = None, limit: Optional[int] = None) -> List[Dict[str, Any]]:
        """The primitives of a kind that are in use, in name order
        (``GET /v1/{kind}``), read a page at a time, every page or the first
        ``limit`` items. ``kind`` is one of ``locks`` (whose names may be
        narrowed to those starting with ``prefix``), ``semaphores``,
        ``elections``, ``barriers``, ``double-barriers``, ``queues``,
        ``groups``, ``counters``."""
        if kind not in KINDS:
            raise InvalidRequest(f"bad kind {kind!r}: one of {', '.join(KINDS)}")
        query: Dict[str, str] = {}
        if prefix is not None:
            if kind != "locks":
                raise InvalidRequest("only the locks take a prefix")
            _name(prefix)
            query["prefix"] = prefix
        return self._pages(kind, query, limit)

    def _pages(self, kind: str, query: Dict[str, str], limit: Optional[int]) -> List[Dict[str, Any]]:
        """Every page of the list of ``kind``, following each page's
        ``next``, or as many as make ``limit`` items."""
        if limit is not None and limit < 1:
            raise InvalidRequest("limit must be 1 or more")
        key = kind.replace("-", "_")
        items: List[Dict[str, Any]] = []
        query = dict(query)
        while True:
            query["limit"] = str(_PAGE if limit is None else min(_PAGE, limit - len(items)))
            page = self._call("GET", f"/v1/{kind}", query=query, safe=True).json()
            items.extend(page[key])
            if limit is not None and len(items) >= limit:
                return items[:limit]  # a gateway may give more than asked
            nxt = page.get("next")
            if not nxt:
                return items
            if nxt == query.get("after"):
                raise ZkgateError(f"the gateway answered the same page of {kind} twice")
            query["after"] = nxt

    # -- reads ---------------------------------------------------------------

    def state(self, kind: str, name: str, *, index: int = 0, wait: Duration = "0s") -> Tuple[Dict[str, Any], int]:
        """The state of a primitive and its ``X-Zkgate-Index``. ``kind`` is one
        of ``locks``, ``semaphores``, ``elections``, ``barriers``,
        ``double-barriers``, ``queues``, ``groups``, ``counters``. With ``index`` and ``wait`` this is a
        blocking read: it answers once the index is past ``index``, or when
        the wait ends (with the unchanged state)."""
        return self._state(kind, name, index, wait, None)

    def _state(
        self, kind: str, name: str, index: int, wait: Duration, stop: Optional[threading.Event]
    ) -> Tuple[Dict[str, Any], int]:
        """state(), cut off when ``stop`` (a Stop) is set."""
        if kind not in KINDS:
            raise InvalidRequest(f"bad kind {kind!r}: one of {', '.join(KINDS)}")
        query = {"index": str(int(index))} if index else {}
        reply = self._call("GET", f"/v1/{kind}/{_name(name)}", query=query, wait=wait, safe=True, stop=stop)
        try:
            idx = int(reply.headers.get("X-Zkgate-Index", "0"))
        except ValueError:
            idx = 0
        return reply.json(), idx

    def watch(
        self, kind: str, name: str, *, wait: Duration = "30s", stop: Optional[threading.Event] = None
    ) -> Iterator[Dict[str, Any]]:
        """Yields the state of a primitive now, then each time it changes,
        with blocking reads of ``wait`` each, until ``stop`` is set or the
        loop is left. A ``threading.Event`` is checked between reads; a
        ``zkgate.Stop`` (such as ``lease.lost``) also ends a read in flight,
        even one blocked on a gateway that has stopped answering."""
        last: Optional[Dict[str, Any]] = None
        index = 0
        while stop is None or not stop.is_set():
            try:
                state, index = self._state(kind, name, index, wait if index else "0s", stop)
            except TransportError:
                if stop is not None and stop.is_set():
                    return  # stopped in the read
                raise
            if state != last:
                last = state
                yield state

    def observe(
        self, election: str, *, wait: Duration = "30s", stop: Optional[threading.Event] = None
    ) -> Iterator[Dict[str, Any]]:
        """Yields an election's state (``leader``, or None, and ``candidates``)
        now and whenever its leader changes: another candidate leads, the
        leader proclaims a new value, or there is none. Changes of the
        candidates in line behind the leader are skipped."""
        last: Optional[Tuple[str, str]] = None
        first = True
        for state in self.watch("elections", election, wait=wait, stop=stop):
            leader = state.get("leader") or {}
            now = (leader.get("node", ""), leader.get("value", ""))
            if first or now != last:
                first, last = False, now
                yield state

    def fence(self, lock: str, token: int) -> bool:
        """Whether ``token`` is the fencing token of a current holder of the
        lock (checked after a sync with ZooKeeper's leader)."""
        try:
            self._call("GET", f"/v1/locks/{_name(lock)}/fence", query={"token": str(int(token))}, safe=True)
            return True
        except ZkgateError as e:
            if e.code == "stale_token":
                return False
            raise

    def ready(self) -> bool:
        """Whether the gateway answers and its ZooKeeper session is live."""
        try:
            return self._send("GET", "/readyz", None, None, "", self.timeout).status == 200
        except TransportError:
            return False

    # -- barriers ------------------------------------------------------------

    def raise_barrier(self, name: str) -> bool:
        """Raises the barrier; True if it was down, False if already up."""
        return self._call("PUT", f"/v1/barriers/{_name(name)}", safe=True).status == 201

    def lower_barrier(self, name: str) -> None:
        """Lowers the barrier, releasing every waiter (lowering one that is down is no error)."""
        self._call("DELETE", f"/v1/barriers/{_name(name)}", safe=True)

    def wait_barrier(self, name: str, wait: Duration = "0s") -> None:
        """Returns once the barrier is down; raises Timeout if it is still up after ``wait``."""
        self._call("POST", f"/v1/barriers/{_name(name)}/wait", wait=wait, safe=True)

    # -- counters ------------------------------------------------------------

    def counter(
        self, name: str, *, format: Optional[str] = None, index: int = 0, wait: Duration = "0s"
    ) -> Tuple[Dict[str, Any], int]:
        """The counter (``name``, ``value``, ``version``: -1 while it does not
        exist, ``format``) and its ``X-Zkgate-Index``; with ``index`` and
        ``wait``, a blocking read. ``format`` is how its znode holds the value:
        ``decimal`` (the default; kazoo's Counter), ``int32`` (Curator's
        SharedCount) or ``int64`` (Curator's DistributedAtomicLong); bytes of
        another format raise FormatMismatch, never give a wrong number."""
        query = _format_query(format)
        if index:
            query["index"] = str(int(index))
        reply = self._call("GET", f"/v1/counters/{_name(name)}", query=query, wait=wait, safe=True)
        try:
            idx = int(reply.headers.get("X-Zkgate-Index", "0"))
        except ValueError:
            idx = 0
        return reply.json(), idx

    def set_counter(
        self, name: str, value: int, *, version: Optional[int] = None, format: Optional[str] = None
    ) -> Dict[str, Any]:
        """Sets the counter to ``value``; with ``version``, only if it is at that
        version (-1: only if it does not exist), else VersionMismatch, whose
        ``problem`` has the ``value`` and ``version`` it is at. A set retried
        after a lost answer that had applied fails that way with its own value."""
        body: Dict[str, Any] = {"value": int(value)}
        if version is not None:
            body["version"] = int(version)
        return self._call("PUT", f"/v1/counters/{_name(name)}", query=_format_query(format), body=body,
                          safe=True).json()

    def add_counter(self, name: str, delta: int, *, format: Optional[str] = None) -> Dict[str, Any]:
        """Adds ``delta`` (negative: subtracts), atomically, and returns the
        counter with the value it made; OutOfRange past the format's range.
        Not retried once sent: an add that raised Unavailable or a
        TransportError may or may not have been applied."""
        return self._call("POST", f"/v1/counters/{_name(name)}/add", query=_format_query(format),
                          body={"delta": int(delta)}).json()

    def delete_counter(self, name: str) -> None:
        """Deletes the counter (deleting one that does not exist is no error)."""
        self._call("DELETE", f"/v1/counters/{_name(name)}", safe=True)

    # -- queues --------------------------------------------------------------

    def produce(
        self,
        queue: str,
        data: Union[bytes, str],
        *,
        priority: Optional[int] = None,
        delay: Optional[Duration] = None,
        not_before: Optional[Union[datetime.datetime, str]] = None,
    ) -> Dict[str, Any]:
        """Adds an item (bytes, or text sent as UTF-8); lower ``priority``
        (0-999, default 100) is served first. With ``delay`` (a duration) or
        ``not_before`` (a datetime, naive meaning local time, or an RFC 3339
        string), not both, nobody takes or claims the item before then (at
        most 30 days ahead); its ``id`` is then a ``due-`` id until it is
        due. Not retried: a produce whose answer was lost may or may not
        have added the item."""
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        query: Dict[str, str] = {}
        if priority is not None:
            query["priority"] = str(int(priority))
        if delay is not None and not_before is not None:
            raise InvalidRequest("give delay or not_before, not both")
        if delay is not None:
            query["delay"] = f"{round(parse_duration(delay) * 1000)}ms"
        if isinstance(not_before, datetime.datetime):
            query["not_before"] = not_before.astimezone(datetime.timezone.utc).isoformat().replace("+00:00", "Z")
        elif not_before is not None:
            query["not_before"] = str(not_before)
        return self._call("POST", f"/v1/queues/{_name(queue)}/items", query=query or None, raw=raw).json()

    def take(self, queue: str, wait: Duration = "0s") -> Optional["Item"]:
        """Removes and returns the next item (at most once), or None if there is
        none after ``wait``. Not retried: a take whose answer was lost lost the item."""
        reply = self._call("POST", f"/v1/queues/{_name(queue)}/take", wait=wait)
        return None if reply.status == 204 else Item(queue, reply)

    def peek(self, queue: str, item_id: str) -> "Item":
        """An item, without taking it."""
        reply = self._call("GET", f"/v1/queues/{_name(queue)}/items/{urllib.parse.quote(item_id, safe='')}", safe=True)
        return Item(queue, reply)

    def delete_queue(self, queue: str) -> None:
        """Deletes an empty queue (NotEmpty if it has items or claims)."""
        self._call("DELETE", f"/v1/queues/{_name(queue)}", safe=True)


_S = TypeVar("_S", bound="_Scoped")


class _Scoped:
    """What a ``with`` block ends as it leaves (a lease revoked, a grant
    released, a candidacy resigned, a barrier left: ``_end``). A failure to
    end it is raised, unless the block raised an error of its own, which it
    would hide."""

    def _end(self) -> None:
        raise NotImplementedError

    def __enter__(self: _S) -> _S:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            self._end()
        except ZkgateError:
            if exc is None:
                raise


class Lease(_Scoped):
    """A lease, kept alive by a background thread.

    ``deadline`` (a ``time.monotonic()`` value) is until when the gateway
    last confirmed the lease: the earlier of its ``expires_at`` and the end
    of a drain of its gateway (``X-Zkgate-Lease-Ends``), counted from when
    the request was sent. A keepalive goes a third of the way from its send
    time to the deadline, and a failing one is retried until then. If the
    deadline comes without a newer confirmation the lease is lost at that
    moment (and revoked at the gateway in the background, so that what it
    held is freed rather than kept until its TTL); it is lost too when the
    gateway answers 410 or 404. Then ``lost`` is set, ``error`` holds why,
    ``on_lost`` is called, and every later call on the lease, ``check()``,
    and the end of its ``with`` block raise that error (a ``LeaseLost``) in
    the thread that uses the lease; a call on it in flight (a lock's wait, a
    campaign's round, a claim) is cut off and raises it too, even if its
    gateway has stopped answering. A grant (of ``lock``, ``semaphore``,
    ``campaign``, ``lead``, ``enter``, ``claim``) whose answer is read as or
    after the lease ends raises that error instead of being returned: what
    it granted is the lease's and ends with it at the gateway, so there is
    nothing to release by hand. Other calls (a release, a resign, an ack)
    answered then return as usual.

    A lease rides through its gateway's restart: once an answer about it
    names the gateway it was handed to (``X-Zkgate-Lease-Moved-To``), its
    calls and keepalives go there (``url``), and to the client's URL again
    if that gateway cannot be connected to (any gateway passes them on).

    A lease is one holder: a second ``lock``, ``semaphore`` or ``campaign``
    of a name it holds or is acquiring raises ``AlreadyHeld`` (the gateway
    would answer it with the first one's grant). Take a lease per
    concurrent holder.
    """

    def __init__(
        self,
        gateway: Gateway,
        info: Dict[str, Any],
        on_lost: Optional[Callable[[LeaseLost], None]] = None,
        asked: Optional[float] = None,
        headers: Optional[Mapping[str, str]] = None,
        *,
        kept: bool = True,
    ) -> None:
        self.gateway = gateway
        self.info: Dict[str, Any] = info
        self.id: str = info["id"]
        self.holder: str = info.get("holder", "")
        self.ttl: float = parse_duration(info["ttl"]) if kept else 0.0
        self.lock_delay: float = parse_duration(info.get("lock_delay") or "0s")
        self.lost = Stop()
        self.error: Optional[LeaseLost] = None
        self._on_lost = on_lost
        self._mu = threading.Lock()
        self._changed = threading.Condition(self._mu)  # the deadline moved, or the lease stopped
        self._revoked = False
        self._stop = threading.Event()
        self._holding: set = set()
        self._last_failure: Optional[ZkgateError] = None
        self._expired = False  # ended here at its deadline: the deadline thread revokes it at the gateway
        self._moved: Optional[_Target] = None  # where a handover moved it (X-Zkgate-Lease-Moved-To)
        sent = time.monotonic() if asked is None else asked
        self._drain_end: Optional[float] = None
        # A lease kept elsewhere (Gateway.lease_by_id) has no deadline here:
        # its keepalives are not this client's to count.
        self._kept = kept
        self._thread: Optional[threading.Thread] = None
        self._watch: Optional[threading.Thread] = None
        if not kept:
            self._promised = self._deadline = math.inf
            return
        if headers is None:
            # The lease runs from the moment it was asked for, at the latest.
            self._promised = self._deadline = sent + self.ttl
        else:
            self._promised = self._deadline = float("-inf")
            self._heard(_Reply(201, headers, b"", sent))  # type: ignore[arg-type]
            self._confirmed(sent, headers, info.get("expires_at"))
        short = self.id[:8]
        self._thread = threading.Thread(target=self._keep_alive, args=(sent,), name=f"zkgate-keepalive-{short}",
                                        daemon=True)
        self._watch = threading.Thread(target=self._watch_deadline, name=f"zkgate-keepalive-{short}-deadline",
                                       daemon=True)
        self._thread.start()
        self._watch.start()

    def __repr__(self) -> str:
        state = "lost" if self.lost.is_set() else ("revoked" if self._revoked else "live")
        return f"<zkgate.Lease {self.id} holder={self.holder!r} ttl={self.ttl:g}s {state}>"

    def _end(self) -> None:
        self.revoke()

    # -- liveness ------------------------------------------------------------

    @property
    def url(self) -> str:
        """The base URL the lease's calls go to: the gateway's, or the one
        that keeps the lease since a handover."""
        to = self._moved_to()
        return to.url if to is not None else self.gateway.url

    def _moved_to(self) -> Optional[_Target]:
        with self._mu:
            return self._moved

    def _unreachable(self, to: _Target) -> None:
        """Forgets ``to`` as the lease's keeper: it may have gone, and the
        gateway's URL passes the lease's calls on to wherever it is kept."""
        with self._mu:
            if self._moved is to:
                self._moved = None

    @property
    def deadline(self) -> float:
        """The ``time.monotonic()`` until which the gateway last confirmed the
        lease: stop the work it guards by then. It moves with each keepalive."""
        with self._mu:
            return self._deadline

    def check(self) -> None:
        """Raises the LeaseLost that ended the lease, if it ended (also if its
        deadline has passed without a newer confirmation)."""
        if self.error is None and not self._revoked and time.monotonic() >= self.deadline:
            self._expire()
        if self.error is not None:
            raise self.error
        if self._revoked:
            raise LeaseExpired("the lease was revoked by this client", code="lease_expired",
                               problem={"reason": "revoked"})

    def _lose(self, err: LeaseLost) -> bool:
        with self._mu:
            if self.error is not None or self._revoked:
                return False
            self.error = err
            self._stop.set()
            self._changed.notify_all()
        self.lost.set()  # cuts off the calls in flight for the lease: they raise err
        if self._on_lost is not None:
            try:
                self._on_lost(err)
            except Exception:  # a callback's failure must not kill the keepalive's report
                pass
        return True

    def _on_our_clock(self, sent: float, headers: Mapping[str, str], at: Optional[str]) -> Optional[float]:
        """The gateway's time ``at`` on this process's monotonic clock: its
        distance from the answer's X-Zkgate-Time, counted from when the request
        was sent (never later than the truth, whatever the clocks' offset).
        None without X-Zkgate-Time."""
        then, now = _rfc3339(at), _rfc3339(headers.get("X-Zkgate-Time"))
        if then is None or now is None:
            return None
        return sent + (then - now)

    def _heard(self, reply: _Reply) -> None:
        """Takes the end of a drain, and where the lease moved, from any answer
        to a call made for the lease. A gateway without X-Zkgate-Time is taken
        to share this clock."""
        moved = reply.headers.get("X-Zkgate-Lease-Moved-To")
        if moved:
            try:
                to: Optional[_Target] = _Target(moved)
            except ValueError:
                to = None
            if to is not None:
                with self._mu:
                    self._moved = None if to.url == self.gateway.url else to
        ends = reply.headers.get("X-Zkgate-Lease-Ends")
        if not ends or not self._kept:
            return
        at = self._on_our_clock(reply.sent, reply.headers, ends)
        if at is None:
            wall = _rfc3339(ends)
            if wall is None:
                return
            at = reply.sent + (wall - time.time())
        with self._mu:
            if self._drain_end is None or at < self._drain_end:
                self._drain_end = at
                self._settle()

    def _confirmed(self, sent: float, headers: Mapping[str, str], expires_at: Optional[str]) -> None:
        """Takes a lease's expires_at from an answer (sent + TTL from a gateway
        without X-Zkgate-Time)."""
        at = self._on_our_clock(sent, headers, expires_at)
        if at is None:
            at = sent + self.ttl
        with self._mu:
            if at > self._promised:
                self._promised = at
                self._settle()

    def _settle(self) -> None:
        """Sets the deadline from what the gateway said. self._mu is held."""
        d = self._promised if self._drain_end is None else min(self._promised, self._drain_end)
        if d != self._deadline:
            self._deadline = d
            self._changed.notify_all()

    def _expire(self) -> None:
        """Ends the lease if its deadline has passed (a no-op otherwise, or if
        it ended already)."""
        with self._mu:
            if time.monotonic() < self._deadline:
                return
            last = self._last_failure
        why = f"no keepalive of lease {self.id} was confirmed before the deadline the gateway promised"
        if last is not None:
            why += f" (the last failure: {last})"
        if self._lose(LeaseLost(why + ": it must be taken as lost")):
            with self._mu:
                self._expired = True

    def _watch_deadline(self) -> None:
        """Ends the lease at its deadline, unless it is stopped first; then
        revokes it at the gateway if it expired here (at this deadline, or
        at a check() that found it passed)."""
        with self._mu:
            while not self._stop.is_set():
                left = self._deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
        self._expire()
        with self._mu:
            expired = self._expired
        if expired:
            self._forget()

    def _forget(self) -> None:
        """Revokes the lease at the gateway after its expiry here, best-effort,
        for at most its TTL (the gateway ends a silent lease then anyway)."""
        until = time.monotonic() + max(self.ttl, 1.0)
        pause = 0.1
        while True:
            left = until - time.monotonic()
            if left <= 0:
                return
            to = self._moved_to()
            try:
                reply = self.gateway._send("DELETE", f"/v1/leases/{self.id}", None, None, "",
                                           min(left, self.gateway.timeout), to)
                self._heard(reply)
                if reply.status not in (429, 502, 503, 504):
                    return  # revoked, or ended already
            except _NotConnected:
                if to is not None:
                    self._unreachable(to)
                    continue
            except TransportError:
                pass
            time.sleep(min(pause, max(0.0, until - time.monotonic())))
            pause = min(pause * 2, 2.0)

    def _keep_alive(self, sent: float) -> None:
        path = f"/v1/leases/{self.id}/keepalive"
        pause = max((self.deadline - sent) / 3, _MIN_KEEPALIVE) - (time.monotonic() - sent)
        while not self._stop.wait(max(pause, 0.0)):
            deadline = self.deadline
            now = time.monotonic()
            if now >= deadline:
                return  # the deadline thread ends the lease
            to = self._moved_to()
            try:
                reply = self.gateway._send("POST", path, None, None, "", max(0.05, deadline - now), to)
                self._heard(reply)
                if reply.status >= 400:
                    raise error_from(reply.status, reply.headers.get("Content-Type", ""), reply.body,
                                     reply.headers.get("Retry-After"))
                info = reply.json()
                self.info = info
                self._confirmed(reply.sent, reply.headers, info.get("expires_at"))
                pause = max((self.deadline - reply.sent) / 3, _MIN_KEEPALIVE) - (time.monotonic() - reply.sent)
            except (TransportError, Unavailable, TooMany) as e:
                if to is not None and isinstance(e, _NotConnected):
                    self._unreachable(to)  # nothing was sent: the gateway's URL passes it on
                    pause = 0.0
                    continue
                # Transient, and confirms nothing (a 503 says the gateway's ZooKeeper
                # session is suspended): try again soon, until the deadline.
                with self._mu:
                    self._last_failure = e
                wait = 0.25 if e.retry_after is None else e.retry_after
                pause = max(0.05, min(wait, self.deadline - time.monotonic()))
            except LeaseLost as e:
                self._lose(e)
                return
            except ZkgateError as e:  # unauthenticated, forbidden...: no keepalive will ever pass
                self._lose(LeaseLost(f"keepalive of lease {self.id} refused: {e}", status=e.status,
                                     code=e.code, problem=e.problem))
                return

    def keepalive(self) -> Dict[str, Any]:
        """Extends the lease now (the background thread does it anyway)."""
        self.check()
        reply = self.gateway._call("POST", f"/v1/leases/{self.id}/keepalive", safe=True, lease=self)
        self.info = reply.json()
        self._confirmed(reply.sent, reply.headers, self.info.get("expires_at"))
        return self.info

    def revoke(self) -> None:
        """Stops the keepalive and revokes the lease: everything it holds is
        released before this returns. Raises the LeaseLost if it was lost."""
        with self._mu:
            already = self._revoked
            self._revoked = True
            self._stop.set()
            self._changed.notify_all()
            expired = self._expired
        for t in (self._thread, self._watch):
            # The revoke after an expiry is left to finish on its own (bounded by the TTL).
            if t is not None and t is not threading.current_thread() and not (t is self._watch and expired):
                t.join()
        if already:
            return
        if self.error is not None:
            raise self.error
        try:
            self.gateway._call("DELETE", f"/v1/leases/{self.id}", safe=True, done_on_retry=(LeaseExpired,), via=self)
        except LeaseExpired as e:
            if e.reason != "revoked":
                self.error = e
                self.lost.set()
                raise

    # -- one holder ----------------------------------------------------------

    def _take(self, kind: str, name: str, mode: Optional[str] = None) -> Tuple[str, str, Optional[str]]:
        """Marks what the lease is acquiring, unless it holds or acquires it
        already: AlreadyHeld then."""
        key = (kind, name, mode)
        with self._mu:
            if key in self._holding:
                what = f"{kind} {name!r}" + (f" ({mode})" if mode not in (None, "exclusive") else "")
                raise AlreadyHeld(f"lease {self.id} already holds (or is acquiring) {what}: "
                                  "one lease is one holder; take a lease per concurrent holder")
            self._holding.add(key)
        return key

    def _drop(self, kind: str, name: str, mode: Optional[str] = None) -> None:
        """Frees what of ``name`` the lease held (every mode of a lock when
        ``mode`` is None), once it was released or its acquire failed."""
        with self._mu:
            self._holding = {k for k in self._holding if not (k[0] == kind and k[1] == name
                                                                and (mode is None or k[2] == mode))}

    # -- locks and semaphores ------------------------------------------------

    def lock(self, name: str, wait: Duration = "0s", mode: str = "exclusive") -> "Grant":
        """Acquires the lock (``mode``: ``exclusive``, ``read`` or ``write``),
        waiting up to ``wait``; raises Timeout if the wait ends first. The
        grant's ``token`` is its fencing token; ``with`` releases it."""
        if mode not in ("exclusive", "read", "write"):
            raise InvalidRequest(f"bad mode {mode!r}: exclusive, read or write")
        path = f"/v1/locks/{_name(name)}/acquire"
        self._take("lock", name, mode)
        try:
            reply = self.gateway._call("POST", path, wait=wait, safe=True, lease=self, grant=True,
                                       body={"lease": self.id, "mode": mode})
            return Grant(self, "lock", reply.json())
        except BaseException:
            self._drop("lock", name, mode)
            raise

    def lock_all(self, locks: Sequence[Union[str, Tuple[str, str]]], wait: Duration = "0s") -> "LockSet":
        """Acquires every lock of ``locks`` (names, or ``(name, mode)`` pairs),
        all or nothing, as Curator's InterProcessMultiLock: the gateway takes
        them in one order (by name), so that two sets never deadlock each
        other, within ``wait`` for the whole set. If one cannot be had, the
        error is that lock's (Timeout, Deadlock...; its ``lock`` extra names
        it) and none of the locks this call took is held. ``with`` releases
        the set."""
        body_locks = _lock_set(locks)
        taken: List[Tuple[str, str]] = []
        try:
            for lk in body_locks:
                self._take("lock", lk["name"], lk["mode"])
                taken.append((lk["name"], lk["mode"]))
            reply = self.gateway._call("POST", "/v1/locks/acquire", wait=wait, safe=True, lease=self, grant=True,
                                       body={"lease": self.id, "locks": body_locks})
            return LockSet(self, body_locks, [Grant(self, "lock", g) for g in reply.json()["locks"]])
        except BaseException:
            for name, mode in taken:
                self._drop("lock", name, mode)
            raise

    def release_all(self, locks: Sequence[Union[str, Tuple[str, str]]]) -> None:
        """Releases every lock of ``locks`` (as given to ``lock_all``). Locks of
        the set that the lease did not hold raise NotHeld, once the others
        are released."""
        body_locks = _lock_set(locks)
        try:
            self.gateway._call("POST", "/v1/locks/release", body={"lease": self.id, "locks": body_locks}, safe=True,
                               lease=self, done_on_retry=(NotHeld,))
        finally:
            for lk in body_locks:
                self._drop("lock", lk["name"], lk["mode"])

    def semaphore(self, name: str, limit: int, wait: Duration = "0s") -> "Grant":
        """Acquires one of the ``limit`` slots of the semaphore, waiting up to ``wait``."""
        path = f"/v1/semaphores/{_name(name)}/acquire"
        self._take("semaphore", name)
        try:
            reply = self.gateway._call("POST", path, wait=wait, safe=True, lease=self, grant=True,
                                       body={"lease": self.id, "limit": int(limit)})
            return Grant(self, "semaphore", reply.json())
        except BaseException:
            self._drop("semaphore", name)
            raise

    def release(self, kind: str, name: str, mode: Optional[str] = None) -> None:
        """Releases a lock (every mode, or ``mode``) or a semaphore slot (``kind``
        ``lock`` or ``semaphore``). Releasing what is not held raises NotHeld."""
        body: Dict[str, Any] = {"lease": self.id}
        if kind == "lock":
            path = f"/v1/locks/{_name(name)}/release"
            if mode is not None:
                body["mode"] = mode
        elif kind == "semaphore":
            path = f"/v1/semaphores/{_name(name)}/release"
        else:
            raise InvalidRequest(f"bad kind {kind!r}: lock or semaphore")
        try:
            self.gateway._call("POST", path, body=body, safe=True, lease=self, done_on_retry=(NotHeld,))
        finally:
            self._drop(kind, name, mode)

    # -- elections -----------------------------------------------------------

    def campaign(self, name: str, value: str = "", wait: Duration = "0s") -> "Campaign":
        """Runs for leader with ``value``, waiting up to ``wait`` to be elected.
        The result says whether it is (``elected``, ``token``) or its
        ``position`` in line; the candidacy stays until ``resign`` (``with``
        resigns) or the end of the lease: campaign again to go on waiting."""
        path = f"/v1/elections/{_name(name)}/campaign"
        self._take("election", name)
        elected = False
        try:
            reply = self.gateway._call("POST", path, wait=wait, safe=True, lease=self, grant=True,
                                       body={"lease": self.id, "value": value})
            campaign = Campaign(self, reply.json())
            elected = campaign.elected
            return campaign
        finally:
            if not elected:  # a candidate in line holds nothing yet: campaign again resumes
                self._drop("election", name)

    def lead(self, name: str, value: str = "", *, round: Duration = "30s", wait: Optional[Duration] = None) -> "Campaign":
        """Campaigns in rounds of ``round`` (the gateway's ``--max-wait`` at
        most) until the lease is elected, and returns the leadership (``with``
        resigns). With ``wait``, if that passes first, or if the wait is
        interrupted (KeyboardInterrupt), the candidacy is withdrawn before
        Timeout (or the interruption) is raised."""
        round_secs = parse_duration(round)
        if round_secs <= 0:
            raise InvalidRequest("the round of lead must be positive")
        until = None if wait is None else time.monotonic() + parse_duration(wait)
        try:
            while True:
                step = round_secs if until is None else max(0.0, min(round_secs, until - time.monotonic()))
                campaign = self.campaign(name, value, step)
                if campaign.elected:
                    return campaign
                if until is not None and time.monotonic() >= until:
                    raise Timeout(f"lease {self.id} was not elected leader of {name!r} within {wait}")
        except (Timeout, KeyboardInterrupt):
            if not self.lost.is_set() and not self._revoked:
                try:
                    self.resign(name)
                except ZkgateError:
                    pass  # the lease's end withdraws it anyway
            raise

    def proclaim(self, name: str, value: str) -> Dict[str, Any]:
        """Sets the leader's value; NotLeader unless this lease leads."""
        return self.gateway._call("PUT", f"/v1/elections/{_name(name)}/value", safe=True, lease=self,
                                  body={"lease": self.id, "value": value}).json()

    def resign(self, name: str) -> None:
        """Withdraws the candidacy (and leadership)."""
        try:
            self.gateway._call("POST", f"/v1/elections/{_name(name)}/resign", body={"lease": self.id}, safe=True,
                               lease=self, done_on_retry=(NotHeld,))
        finally:
            self._drop("election", name)

    # -- double barriers -----------------------------------------------------

    def enter(self, name: str, count: int, member: Optional[str] = None, wait: Duration = "0s") -> "Membership":
        """Enters the double barrier as ``member`` (default: the lease id) and
        waits up to ``wait`` for ``count`` members; raises Timeout otherwise
        (the membership is kept: enter again to go on waiting). ``with``
        leaves at the end, waiting as long for the others to leave."""
        member = member or self.id
        _name(member)
        reply = self.gateway._call("POST", f"/v1/double-barriers/{_name(name)}/enter", wait=wait, safe=True,
                                   lease=self, grant=True,
                                   body={"lease": self.id, "member": member, "count": int(count)})
        return Membership(self, name, member, wait, reply.json())

    def leave(self, name: str, member: Optional[str] = None, wait: Duration = "0s") -> Dict[str, Any]:
        """Leaves the double barrier and waits up to ``wait`` for every member to leave."""
        member = member or self.id
        return self.gateway._call("POST", f"/v1/double-barriers/{_name(name)}/leave", wait=wait, safe=True,
                                  lease=self, body={"lease": self.id, "member": member}).json()

    # -- groups --------------------------------------------------------------

    def join(self, name: str, member: Optional[str] = None, value: str = "") -> "GroupMembership":
        """Joins the group as ``member`` (default: the lease id), with ``value``
        as its data, until it leaves or the lease ends; joining again with the
        same member and value finds the same member. ``with`` leaves at the end."""
        body: Dict[str, Any] = {"lease": self.id, "value": value}
        if member is not None:
            body["member"] = _name(member)
        doc = self.gateway._call("POST", f"/v1/groups/{_name(name)}/join", safe=True, lease=self, grant=True,
                                 body=body).json()
        return GroupMembership(self, name, doc["member"], doc)

    def leave_group(self, name: str, member: Optional[str] = None) -> None:
        """Leaves the group (``member`` defaults to the lease id); a repeat
        that finds the member gone is the success it repeats."""
        self.gateway._call("POST", f"/v1/groups/{_name(name)}/leave", safe=True, lease=self,
                           done_on_retry=(NotHeld,), body={"lease": self.id, "member": _name(member or self.id)})

    # -- queues --------------------------------------------------------------

    def claim(self, queue: str, wait: Duration = "0s") -> Optional["Claim"]:
        """Claims the next item (at least once): it is hidden from others until
        acked, nacked or the lease ends. None if there is none after ``wait``."""
        reply = self.gateway._call("POST", f"/v1/queues/{_name(queue)}/claim", wait=wait, safe=True, lease=self,
                                   grant=True, body={"lease": self.id})
        return None if reply.status == 204 else Claim(self, queue, reply)

    def ack(self, queue: str, item_id: str) -> None:
        """Consumes a claimed item (deleted with the claim in one transaction)."""
        self.gateway._call("POST", f"/v1/queues/{_name(queue)}/items/{urllib.parse.quote(item_id, safe='')}/ack",
                           body={"lease": self.id}, safe=True, lease=self, done_on_retry=(NotClaimed,))

    def nack(self, queue: str, item_id: str) -> None:
        """Gives a claimed item back: it is served again."""
        self.gateway._call("POST", f"/v1/queues/{_name(queue)}/items/{urllib.parse.quote(item_id, safe='')}/nack",
                           body={"lease": self.id}, safe=True, lease=self, done_on_retry=(NotClaimed,))

    def consume(
        self,
        queue: str,
        wait: Duration = "30s",
        *,
        stop: Optional[threading.Event] = None,
        until_empty: bool = False,
    ) -> Iterator["Claim"]:
        """Claims items one at a time: ``for item in lease.consume("emails"):``.

        An item is acked when the loop body finishes and the loop asks for
        the next one; if the loop is left any other way (an exception,
        ``break``, ``return``), it is nacked and served again, unless the body
        acked or nacked it itself. Each claim waits up to ``wait``; the loop
        ends when ``stop`` is set, or with ``until_empty`` when a claim finds
        nothing. A lost lease raises its LeaseLost.
        """
        while stop is None or not stop.is_set():
            item = self.claim(queue, wait)
            if item is None:
                if until_empty:
                    return
                continue
            try:
                yield item
            except BaseException:
                # The loop was left (GeneratorExit) or the body raised into it: give the item back.
                item._settle_quietly()
                raise
            if not item.settled:
                item.ack()


class _Held(_Scoped):
    """What a lease holds until ``release`` (``with`` releases it at the end)."""

    released: bool

    def _release(self) -> None:
        raise NotImplementedError

    def _end(self) -> None:
        self.release()

    def release(self) -> None:
        """Releases it (once). Raises LeaseLost if the lease was lost meanwhile."""
        if self.released:
            return
        self.released = True
        self._release()


class Grant(_Held):
    """A held lock or semaphore slot: ``token`` is its fencing token. ``with`` releases it."""

    def __init__(self, lease: Lease, kind: str, doc: Dict[str, Any]) -> None:
        self.lease = lease
        self.kind = kind
        self.doc = doc
        self.name: str = doc["name"]
        self.token: int = int(doc["token"])
        self.node: str = doc["node"]
        self.mode: Optional[str] = doc.get("mode")
        self.limit: Optional[int] = doc.get("limit")
        self.acquired_at: str = doc["acquired_at"]
        self.released = False

    def __repr__(self) -> str:
        return f"<zkgate.Grant {self.kind} {self.name!r} token={self.token}>"

    def _release(self) -> None:
        self.lease.release(self.kind, self.name, self.mode if self.kind == "lock" else None)

    def is_current(self) -> bool:
        """Whether the token still belongs to a holder of the lock (locks only)."""
        if self.kind != "lock":
            raise InvalidRequest("fencing tokens are checked for locks only")
        return self.lease.gateway.fence(self.name, self.token)


class LockSet(_Held):
    """Locks held together (``Lease.lock_all``): ``grants`` in the order they
    were taken (by name). ``with`` releases them all."""

    def __init__(self, lease: Lease, locks: List[Dict[str, str]], grants: List[Grant]) -> None:
        self.lease = lease
        self.locks = locks
        self.grants = grants
        self.released = False

    def __repr__(self) -> str:
        return f"<zkgate.LockSet {[g.name for g in self.grants]!r}>"

    def _release(self) -> None:
        for g in self.grants:
            g.released = True
        self.lease.release_all([(lk["name"], lk["mode"]) for lk in self.locks])


def _lock_set(locks: Sequence[Union[str, Tuple[str, str]]]) -> List[Dict[str, str]]:
    """The ``locks`` of a set's request: each a name or a (name, mode) pair,
    named once, at most MAX_LOCK_SET of them."""
    if isinstance(locks, str) or not 1 <= len(locks) <= MAX_LOCK_SET:
        raise InvalidRequest(f"a set names from 1 to {MAX_LOCK_SET} locks, as a list")
    out: List[Dict[str, str]] = []
    seen = set()
    for lk in locks:
        name, mode = (lk, "exclusive") if isinstance(lk, str) else lk
        if mode not in ("exclusive", "read", "write"):
            raise InvalidRequest(f"bad mode {mode!r}: exclusive, read or write")
        _name(name)
        if name in seen:
            raise InvalidRequest(f"lock {name!r} is named twice in the set")
        seen.add(name)
        out.append({"name": name, "mode": mode})
    return out


MAX_LOCK_SET = 32
"""The most locks one set may name."""


class Campaign(_Scoped):
    """A lease's standing in an election. ``with`` resigns at the end."""

    def __init__(self, lease: Lease, doc: Dict[str, Any]) -> None:
        self.lease = lease
        self.doc = doc
        self.name: str = doc["name"]
        self.elected: bool = bool(doc["elected"])
        self.token: Optional[int] = int(doc["token"]) if doc.get("token") is not None else None
        self.position: Optional[int] = doc.get("position")
        self.leader: Optional[Dict[str, Any]] = doc.get("leader")
        self.value: str = doc.get("value", "")
        self.resigned = False

    def __repr__(self) -> str:
        what = f"leader token={self.token}" if self.elected else f"position={self.position}"
        return f"<zkgate.Campaign {self.name!r} {what}>"

    def _end(self) -> None:
        self.resign()

    def proclaim(self, value: str) -> None:
        """Sets the leader's value (NotLeader unless elected)."""
        self.doc = self.lease.proclaim(self.name, value)
        self.value = value

    def resign(self) -> None:
        """Withdraws the candidacy (once)."""
        if self.resigned:
            return
        self.resigned = True
        self.lease.resign(self.name)


class Membership(_Scoped):
    """A member of a double barrier that is ready. ``with`` leaves at the end."""

    def __init__(self, lease: Lease, name: str, member: str, wait: Duration, doc: Dict[str, Any]) -> None:
        self.lease = lease
        self.name = name
        self.member = member
        self.wait = wait
        self.doc = doc
        self.members: List[Dict[str, Any]] = doc.get("members", [])
        self.left = False

    def _end(self) -> None:
        self.leave()

    def leave(self, wait: Optional[Duration] = None) -> None:
        """Leaves, waiting up to ``wait`` (default the enter's) for every member to leave."""
        if self.left:
            return
        self.left = True
        self.lease.leave(self.name, self.member, self.wait if wait is None else wait)


class GroupMembership(_Scoped):
    """A member of a group: ``member``, and the group's ``members`` as the
    join answered them. ``with`` leaves at the end."""

    def __init__(self, lease: Lease, name: str, member: str, doc: Dict[str, Any]) -> None:
        self.lease = lease
        self.name = name
        self.member = member
        self.doc = doc
        self.members: List[Dict[str, Any]] = doc.get("members", [])
        self.left = False

    def _end(self) -> None:
        self.leave()

    def leave(self) -> None:
        """Leaves the group (once)."""
        if self.left:
            return
        self.left = True
        self.lease.leave_group(self.name, self.member)


class Item:
    """A queue item: ``id``, ``priority`` and ``data`` (bytes; ``text`` decodes it)."""

    def __init__(self, queue: str, reply: _Reply) -> None:
        self.queue = queue
        self.id: str = reply.headers.get("X-Zkgate-Item-Id", "")
        try:
            self.priority = int(reply.headers.get("X-Zkgate-Item-Priority", "100"))
        except ValueError:
            self.priority = 100
        self.data: bytes = reply.body

    @property
    def text(self) -> str:
        return self.data.decode("utf-8")

    def __repr__(self) -> str:
        return f"<zkgate.{type(self).__name__} {self.queue}/{self.id} {len(self.data)} bytes>"


class Claim(Item):
    """A claimed item: ``ack()`` consumes it, ``nack()`` gives it back."""

    def __init__(self, lease: Lease, queue: str, reply: _Reply) -> None:
        super().__init__(queue, reply)
        self.lease = lease
        self.settled = False

    def ack(self) -> None:
        self.settled = True
        self.lease.ack(self.queue, self.id)

    def nack(self) -> None:
        self.settled = True
        self.lease.nack(self.queue, self.id)

    def _settle_quietly(self) -> None:
        """Nacks, keeping quiet about a failure: an exception is on its way
        already, and a lease that ended gives the item back by itself."""
        if self.settled:
            return
        try:
            self.nack()
        except ZkgateError:
            pass
