"""Typed errors: one class per problem ``code`` of the gateway."""

from __future__ import annotations

import json
from typing import Any, Dict, Mapping, Optional, Type


class ZkgateError(Exception):
    """An answer of the gateway that is not a success, or no answer at all.

    ``status`` is the HTTP status (None when there was no answer), ``code``
    the problem's code (``"timeout"``, ``"lease_expired"``...), ``detail`` its
    human-readable detail, ``problem`` the whole problem document (with any
    extra state: ``holders``, ``position``, ``reason``...), and
    ``retry_after`` the seconds of a ``Retry-After`` header, if any.
    """

    code: Optional[str] = None

    def __init__(
        self,
        detail: str,
        *,
        status: Optional[int] = None,
        code: Optional[str] = None,
        problem: Optional[Mapping[str, Any]] = None,
        retry_after: Optional[float] = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.status = status
        if code is not None:
            self.code = code
        self.problem: Dict[str, Any] = dict(problem or {})
        self.retry_after = retry_after

    def __str__(self) -> str:
        where = []
        if self.status is not None:
            where.append(str(self.status))
        if self.code:
            where.append(self.code)
        prefix = " ".join(where)
        return f"{prefix}: {self.detail}" if prefix else self.detail


class TransportError(ZkgateError):
    """No answer from the gateway: it could not be reached, or the connection
    broke or timed out before the answer. The request may or may not have been
    carried out."""


class Unreachable(TransportError):
    """No connection to the gateway could be made (refused, no route, unknown
    host) in ``1 + connect_retries`` attempts: nothing was sent. The message
    names the gateway's URL and the last failure."""


class InvalidRequest(ZkgateError, ValueError):
    """400 ``invalid_request``, or a request the client refuses to send (a bad
    name or duration)."""

    code = "invalid_request"


class AlreadyHeld(InvalidRequest):
    """The lease already holds, or is acquiring, that lock, semaphore or
    election: one lease is one holder (the gateway would answer the second
    call with the first one's grant, and two holders would share a token).
    Take a lease per concurrent holder. Raised by the client, with no request
    sent."""


class LeaseLost(ZkgateError):
    """The lease is gone: it expired, was revoked, its gateway lost its
    ZooKeeper session, or no keepalive was confirmed before its deadline.
    Whatever it held may now be held by someone else."""


class LeaseExpired(LeaseLost):
    """410 ``lease_expired``: the lease existed but has ended; ``reason`` says
    why (``expired``, ``revoked``, ``session_lost``, ``gateway_shutdown``)."""

    code = "lease_expired"

    @property
    def reason(self) -> Optional[str]:
        r = self.problem.get("reason")
        return r if isinstance(r, str) else None


class LeaseNotFound(LeaseLost):
    """404 ``lease_not_found``: no such lease (or it ended long ago)."""

    code = "lease_not_found"


class NotFound(ZkgateError):
    """404 ``not_found``: no such item, resource or route."""

    code = "not_found"


class Timeout(ZkgateError):
    """409 ``timeout``: the ``wait`` ended before the goal was reached. The
    problem carries the current state (``holders``, ``position``...)."""

    code = "timeout"


class NotHeld(ZkgateError):
    """409 ``not_held``: the lease does not hold (or wait for) it."""

    code = "not_held"


class NotLeader(ZkgateError):
    """409 ``not_leader``: only the leader may proclaim."""

    code = "not_leader"


class NotClaimed(ZkgateError):
    """409 ``not_claimed``: the lease has no claim on this item."""

    code = "not_claimed"


class LimitMismatch(ZkgateError):
    """409 ``limit_mismatch``: the semaphore's holders use another ``limit``."""

    code = "limit_mismatch"


class CountMismatch(ZkgateError):
    """409 ``count_mismatch``: the double barrier was entered with another ``count``."""

    code = "count_mismatch"


class StaleToken(ZkgateError):
    """409 ``stale_token``: the fencing token is not a current holder's."""

    code = "stale_token"


class WouldDeadlock(ZkgateError):
    """409 ``would_deadlock``: the lease would wait for its own node."""

    code = "would_deadlock"


class Deadlock(ZkgateError):
    """409 ``deadlock``: the wait was ended to break a deadlock; ``cycle`` names it.

    The lease keeps what it holds: let something go, or try again.
    """

    code = "deadlock"


class NotEmpty(ZkgateError):
    """409 ``not_empty``: the queue still has items or claims."""

    code = "not_empty"


class Unauthenticated(ZkgateError):
    """401 ``unauthenticated``: tokens are on and this one is missing or unknown."""

    code = "unauthenticated"


class Forbidden(ZkgateError):
    """403 ``forbidden``: the token lacks the permission, or the lease is another token's."""

    code = "forbidden"


class MethodNotAllowed(ZkgateError):
    """405 ``method_not_allowed``."""

    code = "method_not_allowed"


class TooLarge(ZkgateError):
    """413 ``too_large``: the body is above the gateway's limit."""

    code = "too_large"


class UnsupportedMediaType(ZkgateError):
    """415 ``unsupported_media_type``."""

    code = "unsupported_media_type"


class TooMany(ZkgateError):
    """429 ``too_many``: a limit (leases, waiters, rate) is reached; see ``retry_after``."""

    code = "too_many"


class QueueFull(ZkgateError):
    """507 ``queue_full``: the item would pass a cap of the queues; ``problem`` names it
    (``exceeded``, ``max``) and what the queue and all queues hold."""

    code = "queue_full"


class VersionMismatch(ZkgateError):
    """409 ``version_mismatch``: a compare-and-set of a counter found it at
    another version; ``problem`` has its ``value`` and ``version``."""

    code = "version_mismatch"


class FormatMismatch(ZkgateError):
    """409 ``format_mismatch``: the counter's bytes are not of the format asked
    for; ``problem["fits"]`` names the formats they fit."""

    code = "format_mismatch"


class OutOfRange(ZkgateError):
    """409 ``out_of_range``: an add would overflow the counter's format."""

    code = "out_of_range"


class Unavailable(ZkgateError):
    """503 ``unavailable``: the gateway's ZooKeeper session is suspended or
    being re-established; see ``retry_after``."""

    code = "unavailable"


class InternalError(ZkgateError):
    """500 ``internal``: a fault of the gateway (never caused by the request)."""

    code = "internal"


_BY_CODE: Dict[str, Type[ZkgateError]] = {
    c.code: c  # type: ignore[misc]
    for c in (
        InvalidRequest, LeaseExpired, LeaseNotFound, NotFound, Timeout, NotHeld, NotLeader,
        NotClaimed, LimitMismatch, CountMismatch, StaleToken, WouldDeadlock, Deadlock, NotEmpty,
        Unauthenticated, Forbidden, MethodNotAllowed, TooLarge, UnsupportedMediaType, TooMany,
        QueueFull, Unavailable, InternalError,
        VersionMismatch, FormatMismatch, OutOfRange,
    )
}

# Answers that are not problem documents (a proxy's, say) are classed by status.
_BY_STATUS: Dict[int, Type[ZkgateError]] = {
    400: InvalidRequest, 401: Unauthenticated, 403: Forbidden, 404: NotFound,
    405: MethodNotAllowed, 413: TooLarge, 415: UnsupportedMediaType, 429: TooMany,
    500: InternalError, 502: Unavailable, 503: Unavailable, 504: Unavailable, 507: QueueFull,
}


def error_from(status: int, content_type: str, body: bytes, retry_after: Optional[str]) -> ZkgateError:
    """The typed error of an answer with an error status."""
    after: Optional[float] = None
    if retry_after:
        try:
            after = max(0.0, float(int(retry_after.strip())))
        except ValueError:
            after = None
    problem: Dict[str, Any] = {}
    if "json" in content_type:
        try:
            doc = json.loads(body.decode("utf-8"))
            if isinstance(doc, dict):
                problem = doc
        except (ValueError, UnicodeDecodeError):
            problem = {}
    code = problem.get("code") if isinstance(problem.get("code"), str) else None
    detail = problem.get("detail") if isinstance(problem.get("detail"), str) else None
    if not detail:
        text = body.decode("utf-8", "replace").strip()
        detail = text[:200] if text else f"HTTP {status}"
    cls = _BY_CODE.get(code or "") or _BY_STATUS.get(status) or ZkgateError
    return cls(detail, status=status, code=code or cls.code, problem=problem, retry_after=after)
