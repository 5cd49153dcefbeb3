#!/usr/bin/env python3
"""A worker: takes a lease (kept alive on a thread) and a lock, writes to a
store that checks the lock's fencing token, and consumes a queue at least once.

    pip install ./client/python      # see docs/clients.md for installing offline
    ZKGATE_URL=http://127.0.0.1:8080 python3 examples/python/worker.py [LOCK [QUEUE]]

It produces its own three items first, so that it runs on its own; it exits
non-zero on any failure.
"""

import sys
from typing import List

import zkgate


class FencedStore:
    """A store that takes a write only with the token of a current holder of
    the lock, and never with a token older than one it has seen. (A real
    store keeps the highest token next to the data, in the same transaction.)"""

    def __init__(self, gate: zkgate.Gateway, lock: str) -> None:
        self.gate = gate
        self.lock = lock
        self.highest = 0
        self.lines: List[str] = []

    def write(self, token: int, line: str) -> None:
        if token < self.highest:
            raise PermissionError(f"store: token {token} is older than {self.highest}")
        if not self.gate.fence(self.lock, token):
            raise PermissionError(f"store: token {token} is stale")
        self.highest = token
        self.lines.append(line)


def main(argv: List[str]) -> int:
    lock = argv[1] if len(argv) > 1 else "invoices"
    queue = argv[2] if len(argv) > 2 else "emails"
    gate = zkgate.Gateway()  # $ZKGATE_URL, $ZKGATE_TOKEN
    store = FencedStore(gate, lock)

    for i in range(1, 4):  # the producer's side
        gate.produce(queue, f"email {i}")

    with gate.lease(ttl="15s", holder="python-worker") as lease:
        with lease.lock(lock, wait="10s") as grant:
            print(f"lock {lock} held with fencing token {grant.token}")
            # Each item is acked when the body ends, nacked if it raises.
            for item in lease.consume(queue, wait="1s", until_empty=True):
                store.write(grant.token, item.text)
        try:
            store.write(grant.token, "too late")
            print("the store took a write with a released token", file=sys.stderr)
            return 1
        except PermissionError:
            pass  # released: the token is stale now

    print(f"consumed {len(store.lines)} items:", *store.lines, sep="\n")
    if len(store.lines) < 3:
        print(f"expected at least 3 items, consumed {len(store.lines)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except zkgate.ZkgateError as e:
        print(f"worker: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
