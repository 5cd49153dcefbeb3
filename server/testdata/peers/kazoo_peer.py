"""A test peer for zkgate's interoperability tests (server/interop_test.go):
kazoo's Lock recipe driven by line commands.

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
"""

import logging
import queue
import sys
import threading

from kazoo.client import KazooClient
from kazoo.recipe.lock import Lock

_out = threading.Lock()


def say(line):
    with _out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


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


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: kazoo_peer.py <connect-string>\n")
        sys.exit(2)
    logging.basicConfig(level=logging.ERROR)
    client = KazooClient(hosts=sys.argv[1], timeout=2.0)
    client.start(timeout=30)
    say("READY")

    handles = {}
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
