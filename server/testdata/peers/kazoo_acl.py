"""A kazoo client for zkgate's ZooKeeper ACL test (server/zkauth_test.go).

Usage: /usr/bin/python3 kazoo_acl.py <connect-string> <path> [digest-user:password]

With credentials it authenticates (digest) before anything else. It prints
one line of what it could do with <path>, a node the gateway made:

  READ <data length>        it could read the node (every identity can)
  ACL <scheme>:<id>:<perms> each ACL entry of the node
  DELETED                   it deleted the node
  NOAUTH                    ZooKeeper refused the delete (NoAuthError)
  ERROR <message>           anything else
"""
import sys

from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError


def main():
    hosts, path = sys.argv[1], sys.argv[2]
    auth = [("digest", sys.argv[3])] if len(sys.argv) > 3 else None
    client = KazooClient(hosts=hosts, auth_data=auth, timeout=20)
    client.start(timeout=20)
    try:
        data, _ = client.get(path)
        print("READ %d" % len(data), flush=True)
        acls, _ = client.get_acls(path)
        for acl in acls:
            print("ACL %s:%s:%d" % (acl.id.scheme, acl.id.id, acl.perms), flush=True)
        try:
            client.delete(path)
            print("DELETED", flush=True)
        except NoAuthError:
            print("NOAUTH", flush=True)
    except Exception as e:  # reported, not raised: the test reads stdout
        print("ERROR %s: %s" % (type(e).__name__, e), flush=True)
    finally:
        client.stop()
        client.close()


if __name__ == "__main__":
    main()
