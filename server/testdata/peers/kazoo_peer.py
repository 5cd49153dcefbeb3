"""A test peer for zkgate's interoperability tests (server/interop_test.go,
server/interop_coord_test.go): kazoo's Lock and LockingQueue recipes driven
by line commands.

Usage: /usr/bin/python3 kazoo_peer.py <connect-string>

It prints READY once its session is connected, then reads one command a
line from stdin. Every acquire runs on a thread of its own, so commands keep
being read while an acquire blocks. <id> names one acquire.

  lock <id> <path>    kazoo Lock(client, path, identifier,
                      extra_lock_patterns=["-lock-"]), so that the `-lock-`
                      nodes of zkgate and Curator count as contenders
      answer at once:  WAITING <id>
      once it holds:   ACQUIRED <id> <node name>
      on failure:      ERROR <id> <message>
  release <id>        RELEASED <id>  (after the node is deleted)
  status <id>         STATUS <id> waiting|acquired|released|unknown
  exit                BYE, then the session is closed

Queues: <qid> names one LockingQueue(client, path). Each queue runs its
commands in order on a thread of its own, so a blocking get does not stop
the reading of commands. Values are hex on the wire ("-" is the empty
value), so that any bytes go through byte-exact.

  queue <qid> <path>                  QUEUE <qid>
  put <qid> <priority> <hex>          PUT <qid> 1        (LockingQueue.put)
  put-all <qid> <priority> <hex>...   PUT <qid> <n>      (LockingQueue.put_all)
  get <qid> <timeout-seconds>         GOT <qid> <entry> <hex>, or EMPTY <qid>
                                      when the timeout ends first
                                      (LockingQueue.get: locks the entry with
                                      an ephemeral taken/<entry>)
  consume <qid>                       CONSUMED <qid> True|False
  qrelease <qid>                      QRELEASED <qid> True|False
                                      (LockingQueue.release: unlocks without
                                      consuming)
  holds <qid>                         HOLDS <qid> True|False
  len <qid>                           LEN <qid> <n>
  on failure:                         ERROR <qid> <message>

Groups: <pid> names one member, a Party(client, path, identifier) or a
ShallowParty; identifiers are single words.

  party <pid> <path> <identifier>     JOINED <pid>       (Party.join)
  shallow <pid> <path> <identifier>   JOINED <pid>       (ShallowParty.join)
  pleave <pid>                        PLEFT <pid>        (leave)
  party-members <path>                PARTY <json list>  (list(Party(client, path)): the data of
                                                          every child whose name holds __party__)
Counters: <cid> names one Counter(client, path, support_curator=...)
(curator 1: the 4-byte big-endian int of Curator's SharedCount; 0: the
ASCII repr). Each counter runs its commands in order on a thread of its
own, so that the test can add through zkgate meanwhile.

  counter <cid> <path> <curator 0|1>  COUNTER <cid>
  cadd <cid> <delta> <times>          CADDED <cid> <post_value>  (counter += delta,
                                      times over; kazoo retries on BadVersion)
  cget <cid>                          CVALUE <cid> <value>
  on failure:                         ERROR <cid> <message>

Barriers: <bid> names one Barrier(client, path). Its wait runs on a thread
of its own.

  barrier <bid> <path>                BARRIER <bid>
  bset <bid>                          BSET <bid>             (Barrier.create)
  bremove <bid>                       BREMOVED <bid> True|False  (Barrier.remove:
                                                             whether it was up)
  bwait <bid> <timeout-seconds>       BWAITED <bid> True|False   (Barrier.wait: True once
                                                             it is down, False on timeout)
"""

import binascii
import json
import logging
import queue
import sys
import threading

from kazoo.client import KazooClient
from kazoo.recipe.barrier import Barrier
from kazoo.recipe.counter import Counter
from kazoo.recipe.lock import Lock
from kazoo.recipe.party import Party, ShallowParty
from kazoo.recipe.queue import LockingQueue

_out = threading.Lock()


def say(line):
    with _out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def hand_on(handles, what, f):
    """Hands the command f to the thread of the handle it names (f[1]) among
    handles, the peer's handles of a kind (what), or says there is none."""
    h = handles.get(f[1])
    if h is None:
        say("ERROR %s no %s" % (f[1], what))
    else:
        h.cmds.put(f)


class Handle:
    def __init__(self, hid, lock):
        self.id = hid
        self.lock = lock
        self.state = "waiting"
        self.cmds = queue.Queue()

    def run(self):
        try:
            self.lock.acquire()
            self.state = "acquired"
            say("ACQUIRED %s %s" % (self.id, self.lock.node))
        except Exception as e:  # noqa: BLE001 - report anything to the test
            self.state = "failed"
            say("ERROR %s acquire: %r" % (self.id, e))
            return
        try:
            self.cmds.get()  # the release
            self.lock.release()
            self.state = "released"
            say("RELEASED %s" % self.id)
        except Exception as e:  # noqa: BLE001
            say("ERROR %s release: %r" % (self.id, e))


def unhex(s):
    return b"" if s == "-" else binascii.unhexlify(s)


def tohex(b):
    return binascii.hexlify(b).decode() if b else "-"


class QueueHandle:
    """A LockingQueue whose commands run in order on a thread of its own."""

    def __init__(self, qid, client, path):
        self.id = qid
        self.q = LockingQueue(client, path)
        self.cmds = queue.Queue()
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        while True:
            f = self.cmds.get()
            try:
                self.do(f)
            except Exception as e:  # noqa: BLE001 - report anything to the test
                say("ERROR %s %s: %r" % (self.id, f[0], e))

    def do(self, f):
        cmd, q = f[0], self.q
        if cmd == "put":
            q.put(unhex(f[3]), priority=int(f[2]))
            say("PUT %s 1" % self.id)
        elif cmd == "put-all":
            values = [unhex(v) for v in f[3:]]
            q.put_all(values, priority=int(f[2]))
            say("PUT %s %d" % (self.id, len(values)))
        elif cmd == "get":
            value = q.get(timeout=float(f[2]))
            if value is None:
                say("EMPTY %s" % self.id)
            else:
                say("GOT %s %s %s" % (self.id, q.processing_element[0], tohex(value)))
        elif cmd == "consume":
            say("CONSUMED %s %s" % (self.id, q.consume()))
        elif cmd == "qrelease":
            say("QRELEASED %s %s" % (self.id, q.release()))
        elif cmd == "holds":
            say("HOLDS %s %s" % (self.id, q.holds_lock()))
        elif cmd == "len":
            say("LEN %s %d" % (self.id, len(q)))


QUEUE_COMMANDS = ("put", "put-all", "get", "consume", "qrelease", "holds", "len")


class CounterHandle(QueueHandle):
    """A kazoo Counter whose commands run in order on a thread of its own."""

    def __init__(self, cid, client, path, curator):
        self.id = cid
        self.c = Counter(client, path, support_curator=curator)
        self.cmds = queue.Queue()
        threading.Thread(target=self.run, daemon=True).start()

    def do(self, f):
        cmd, c = f[0], self.c
        if cmd == "cadd":
            for _ in range(int(f[3])):
                c += int(f[2])
            say("CADDED %s %s" % (self.id, c.post_value))
        elif cmd == "cget":
            say("CVALUE %s %s" % (self.id, c.value))


COUNTER_COMMANDS = ("cadd", "cget")


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: kazoo_peer.py <connect-string>\n")
        sys.exit(2)
    logging.basicConfig(level=logging.ERROR)
    client = KazooClient(hosts=sys.argv[1], timeout=2.0)
    client.start(timeout=30)
    say("READY")

    handles = {}
    queues = {}
    parties = {}
    counters = {}
    barriers = {}
    while True:
        line = sys.stdin.readline()
        if not line:
            break
        f = line.split()
        if not f:
            continue
        try:
            cmd = f[0]
            if cmd == "lock":
                hid, path = f[1], f[2]
                if hid in handles:
                    say("ERROR %s id in use" % hid)
                    continue
                lock = Lock(client, path, identifier="kazoo-peer-" + hid,
                            extra_lock_patterns=["-lock-"])
                h = Handle(hid, lock)
                handles[hid] = h
                say("WAITING %s" % hid)
                threading.Thread(target=h.run, daemon=True).start()
            elif cmd == "queue":
                qid, path = f[1], f[2]
                if qid in queues:
                    say("ERROR %s id in use" % qid)
                    continue
                queues[qid] = QueueHandle(qid, client, path)
                say("QUEUE %s" % qid)
            elif cmd in QUEUE_COMMANDS:
                hand_on(queues, "queue", f)
            elif cmd in ("party", "shallow"):
                kind = Party if cmd == "party" else ShallowParty
                p = kind(client, f[2], f[3])
                p.join()
                parties[f[1]] = p
                say("JOINED %s" % f[1])
            elif cmd == "pleave":
                parties.pop(f[1]).leave()
                say("PLEFT %s" % f[1])
            elif cmd == "party-members":
                say("PARTY %s" % json.dumps(sorted(Party(client, f[1]))))
            elif cmd == "counter":
                counters[f[1]] = CounterHandle(f[1], client, f[2], f[3] == "1")
                say("COUNTER %s" % f[1])
            elif cmd in COUNTER_COMMANDS:
                hand_on(counters, "counter", f)
            elif cmd == "barrier":
                barriers[f[1]] = Barrier(client, f[2])
                say("BARRIER %s" % f[1])
            elif cmd == "bset":
                barriers[f[1]].create()
                say("BSET %s" % f[1])
            elif cmd == "bremove":
                say("BREMOVED %s %s" % (f[1], barriers[f[1]].remove()))
            elif cmd == "bwait":
                b, bid, timeout = barriers[f[1]], f[1], float(f[2])
                threading.Thread(target=lambda: say("BWAITED %s %s" % (bid, b.wait(timeout))),
                                 daemon=True).start()
            elif cmd == "release":
                h = handles.get(f[1])
                if h is None or h.state != "acquired":
                    say("ERROR %s not acquired" % f[1])
                else:
                    h.cmds.put("release")
            elif cmd == "status":
                h = handles.get(f[1])
                say("STATUS %s %s" % (f[1], "unknown" if h is None else h.state))
            elif cmd == "exit":
                client.stop()
                client.close()
                say("BYE")
                return
            else:
                say("ERROR - unknown command: " + line.strip())
        except IndexError:
            say("ERROR - bad command: " + line.strip())
    client.stop()
    client.close()


if __name__ == "__main__":
    main()
