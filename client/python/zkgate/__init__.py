"""A client of zkgate, ZooKeeper's coordination recipes over HTTP.

    import zkgate

    gate = zkgate.Gateway()                      # $ZKGATE_URL, $ZKGATE_TOKEN
    # one lease per concurrent holder (a thread that holds locks)
    with gate.lease(ttl="15s", holder="billing-worker-3") as lease:
        with lease.lock("invoices", wait="10s") as grant:
            write_invoices(fencing_token=grant.token)
        for item in lease.consume("emails", wait="30s"):
            send(item.data)                      # acked when the body ends, nacked if it raises

Standard library only; Python 3.9 and later.
"""

from ._client import (
    COUNTER_FORMATS,
    DEFAULT_CONNECT_RETRIES,
    DEFAULT_URL,
    KINDS,
    MAX_LOCK_SET,
    Campaign,
    Claim,
    Duration,
    Gateway,
    Grant,
    GroupMembership,
    Item,
    Lease,
    LockSet,
    Membership,
    Stop,
    __version__,
    format_duration,
    parse_duration,
)
from ._errors import (
    AlreadyHeld,
    CountMismatch,
    Deadlock,
    Forbidden,
    InternalError,
    InvalidRequest,
    LeaseExpired,
    LeaseLost,
    LeaseNotFound,
    LimitMismatch,
    MethodNotAllowed,
    NotClaimed,
    NotEmpty,
    NotFound,
    NotHeld,
    NotLeader,
    QueueFull,
    StaleToken,
    Timeout,
    TooLarge,
    TooMany,
    TransportError,
    Unauthenticated,
    Unavailable,
    Unreachable,
    UnsupportedMediaType,
    WouldDeadlock,
    ZkgateError,
)
from ._errors import FormatMismatch, OutOfRange, VersionMismatch

__all__ = [
    "DEFAULT_CONNECT_RETRIES", "DEFAULT_URL", "KINDS", "MAX_LOCK_SET", "Campaign", "Claim", "Duration", "Gateway", "Grant",
    "GroupMembership", "Item", "Lease", "LockSet",
    "Membership", "Stop", "__version__", "format_duration", "parse_duration",
    "AlreadyHeld", "CountMismatch", "Deadlock", "Forbidden", "InternalError", "InvalidRequest", "LeaseExpired", "LeaseLost",
    "LeaseNotFound", "LimitMismatch", "MethodNotAllowed", "NotClaimed", "NotEmpty", "NotFound",
    "NotHeld", "NotLeader", "QueueFull", "StaleToken", "Timeout", "TooLarge", "TooMany", "TransportError",
    "Unauthenticated", "Unavailable", "Unreachable", "UnsupportedMediaType", "WouldDeadlock", "ZkgateError",
    "COUNTER_FORMATS", "FormatMismatch", "OutOfRange", "VersionMismatch",
]
