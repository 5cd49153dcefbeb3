// CuratorPeer is a test peer for zkgate's interoperability tests
// (server/interop_test.go): Apache Curator recipes driven by line commands.
//
// Usage: java -cp <curator-recipes.jar>:<dir> CuratorPeer <connect-string>
//
// It prints READY once its session is connected, then reads one command a
// line from stdin. Every acquire runs on a thread of its own (Curator's
// InterProcessMutex must be released by the thread that acquired it), so
// commands keep being read while an acquire blocks. <id> names one acquire.
//
//   mutex <id> <path>            InterProcessMutex
//   rw-read <id> <path>          InterProcessReadWriteLock.readLock()
//   rw-write <id> <path>         InterProcessReadWriteLock.writeLock()
//   semaphore <id> <path> <n>    InterProcessSemaphoreV2 with n leases
//       answer at once:  WAITING <id>
//       once it holds:   ACQUIRED <id> <node name>
//       on failure:      ERROR <id> <message>
//   latch <id> <path>            LeaderLatch(client, path, "curator-latch-<id>"):
//                                start(), then await() on a thread of its own
//       once its node exists:  WAITING <id> <node name>
//       once it leads:         ACQUIRED <id> <node name>
//   leader <id>                  LEADER <id> true|false <node name|->
//                                (LeaderLatch.hasLeadership(), getOurPath())
//   release <id>                 RELEASED <id>  (after the node is deleted;
//                                for a latch: close(), also while it waits)
//   status <id>                  STATUS <id> waiting|acquired|released|unknown
//   exit                         BYE, then the session is closed
//
// Groups: <id> names one GroupMember(client, path, memberId, payload).
//
//   member <id> <path> <memberId> <payload>   start(): JOINED <id>
//   members <id>                 MEMBERS <id> <memberId>,... sorted
//                                (getCurrentMembers(), from its cache)
//   mleave <id>                  close(): MLEFT <id>
// Counters, each command on a thread of its own, so that the test can add
// through zkgate meanwhile (<id> names the command in its answer):
//
//   shared-add <id> <path> <delta> <times>
//                                SharedCount(client, path, 0): trySetCount of
//                                the value read plus delta, again until it
//                                applies, times over: SHARED <id> <count>
//   shared-get <id> <path>       SHARED <id> <count>
//   long-add <id> <path> <delta> <times> <lock path|->
//                                DistributedAtomicLong (promoted to a lock at
//                                lock path unless -): add(delta), again until
//                                it succeeds, times over: LONG <id> <postValue>
//   long-get <id> <path>         LONG <id> <value>
//
// Barriers, each command on a thread of its own too:
//
//   barrier-set <id> <path>      DistributedBarrier.setBarrier(): BARRIER <id> set
//   barrier-remove <id> <path>   removeBarrier(): BARRIER <id> removed
//   barrier-wait <id> <path> <seconds>
//                                waitOnBarrier(seconds): BWAITED <id> true|false
//                                (true: the barrier was down, or came down)
//   dbarrier <id> <path> <count> DistributedDoubleBarrier(client, path, count): DBARRIER <id>
//   denter <id> <seconds>        enter(seconds): DENTERED <id> true|false
//   dleave <id> <seconds>        leave(seconds): DLEFT <id> true|false
//
// Nothing compiled from this file is committed: the Go test compiles it.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.atomic.PromotedToLock;
import org.apache.curator.framework.recipes.barriers.DistributedBarrier;
import org.apache.curator.framework.recipes.barriers.DistributedDoubleBarrier;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.nodes.GroupMember;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.shared.SharedCount;
import org.apache.curator.framework.recipes.shared.VersionedValue;
import org.apache.curator.retry.RetryNTimes;
import org.apache.curator.utils.ZKPaths;

public class CuratorPeer {
    static final Object out = new Object();

    /** Runs body on a daemon thread of that name, which never keeps the peer alive. */
    static void daemon(Runnable body, String name) {
        Thread t = new Thread(body, name);
        t.setDaemon(true);
        t.start();
    }

    static void say(String line) {
        synchronized (out) {
            System.out.println(line);
            System.out.flush();
        }
    }

    /** One acquire, held by its own thread until released. */
    static final class Handle {
        final String id;
        final BlockingQueue<String> cmds = new LinkedBlockingQueue<>();
        volatile String state = "waiting";

        Handle(String id) {
            this.id = id;
        }
    }

    static final Map<String, Handle> handles = new ConcurrentHashMap<>();
    static final Map<String, LeaderLatch> latches = new ConcurrentHashMap<>();
    static final Map<String, GroupMember> members = new ConcurrentHashMap<>();
    static final Map<String, DistributedDoubleBarrier> doubleBarriers = new ConcurrentHashMap<>();

    interface Holding {
        /** Blocks until held; returns the node name. */
        String acquire() throws Exception;

        void release() throws Exception;
    }

    static String lockNode(InterProcessMutex m) throws Exception {
        // getLockPath is protected (and overridden by the read/write locks).
        Method get = InterProcessMutex.class.getDeclaredMethod("getLockPath");
        get.setAccessible(true);
        return ZKPaths.getNodeFromPath((String) get.invoke(m));
    }

    static Holding mutex(InterProcessMutex m) {
        return new Holding() {
            public String acquire() throws Exception {
                m.acquire();
                return lockNode(m);
            }

            public void release() throws Exception {
                m.release();
            }
        };
    }

    static Holding semaphore(CuratorFramework client, String path, int limit) {
        InterProcessSemaphoreV2 sem = new InterProcessSemaphoreV2(client, path, limit);
        return new Holding() {
            Lease lease;

            public String acquire() throws Exception {
                lease = sem.acquire();
                return lease.getNodeName();
            }

            public void release() throws Exception {
                lease.close();
            }
        };
    }

    static void start(String id, Holding h) {
        Handle hd = new Handle(id);
        if (handles.putIfAbsent(id, hd) != null) {
            say("ERROR " + id + " id in use");
            return;
        }
        say("WAITING " + id);
        daemon(() -> {
            try {
                String node = h.acquire();
                hd.state = "acquired";
                say("ACQUIRED " + id + " " + node);
            } catch (Exception e) {
                hd.state = "failed";
                say("ERROR " + id + " acquire: " + e);
                return;
            }
            try {
                hd.cmds.take(); // the release
                h.release();
                hd.state = "released";
                say("RELEASED " + id);
            } catch (Exception e) {
                say("ERROR " + id + " release: " + e);
            }
        }, "peer-" + id);
    }

    /**
     * Starts a LeaderLatch, waits (bounded) until its node exists, says
     * WAITING with it, and awaits leadership on a thread of its own. A
     * release closes the latch, whether it leads or still waits, and is
     * answered once its node is gone.
     */
    static void startLatch(CuratorFramework client, String id, String path) {
        Handle hd = new Handle(id);
        if (handles.putIfAbsent(id, hd) != null) {
            say("ERROR " + id + " id in use");
            return;
        }
        LeaderLatch latch = new LeaderLatch(client, path, "curator-latch-" + id);
        latches.put(id, latch);
        String ourPath;
        try {
            latch.start();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while ((ourPath = latch.getOurPath()) == null) {
                if (System.nanoTime() > deadline) {
                    hd.state = "failed";
                    say("ERROR " + id + " latch: no node within 10s");
                    return;
                }
                Thread.sleep(5);
            }
        } catch (Exception e) {
            hd.state = "failed";
            say("ERROR " + id + " latch start: " + e);
            return;
        }
        say("WAITING " + id + " " + ZKPaths.getNodeFromPath(ourPath));
        daemon(() -> {
            try {
                latch.await();
                if (latch.hasLeadership() && hd.state.equals("waiting")) {
                    hd.state = "acquired";
                    say("ACQUIRED " + id + " " + ZKPaths.getNodeFromPath(latch.getOurPath()));
                }
            } catch (java.io.EOFException | InterruptedException e) {
                // closed before it led
            } catch (Exception e) {
                hd.state = "failed";
                say("ERROR " + id + " await: " + e);
            }
        }, "latch-" + id);
        daemon(() -> {
            try {
                hd.cmds.take(); // the release
                String node = latch.getOurPath();
                latch.close();
                // close() deletes the node in the background: wait for it.
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                while (node != null && client.checkExists().forPath(node) != null) {
                    if (System.nanoTime() > deadline) {
                        say("ERROR " + id + " release: " + node + " still there 10s after close()");
                        return;
                    }
                    Thread.sleep(5);
                }
                hd.state = "released";
                say("RELEASED " + id);
            } catch (Exception e) {
                say("ERROR " + id + " release: " + e);
            }
        }, "latch-close-" + id);
    }

    /** Runs a counter's command on a thread of its own; a failure is ERROR id. */
    static void counter(String id, String what, Callable body) {
        daemon(() -> {
            try {
                say(body.call());
            } catch (Exception e) {
                say("ERROR " + id + " " + what + ": " + e);
            }
        }, what + "-" + id);
    }

    interface Callable {
        String call() throws Exception;
    }

    static String sharedAdd(CuratorFramework client, String id, String path, int delta, int times) throws Exception {
        try (SharedCount sc = new SharedCount(client, path, 0)) {
            sc.start();
            for (int i = 0; i < times; i++) {
                while (true) {
                    VersionedValue<Integer> v = sc.getVersionedValue();
                    if (sc.trySetCount(v, v.getValue() + delta)) {
                        break;
                    }
                }
            }
            return "SHARED " + id + " " + sc.getCount();
        }
    }

    static String longAdd(CuratorFramework client, String id, String path, long delta, int times, String lock) throws Exception {
        DistributedAtomicLong l = lock.equals("-")
                ? new DistributedAtomicLong(client, path, new RetryNTimes(1000, 1))
                : new DistributedAtomicLong(client, path, new RetryNTimes(3, 1),
                        PromotedToLock.builder().lockPath(lock).retryPolicy(new RetryNTimes(1000, 1)).build());
        long post = 0;
        for (int i = 0; i < times; i++) {
            while (true) {
                AtomicValue<Long> v = l.add(delta);
                if (v.succeeded()) {
                    post = v.postValue();
                    break;
                }
            }
        }
        return "LONG " + id + " " + post;
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: CuratorPeer <connect-string>");
            System.exit(2);
        }
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(args[0])
                .sessionTimeoutMs(2000)
                .connectionTimeoutMs(5000)
                .retryPolicy(new RetryNTimes(3, 100))
                .defaultData("curator-peer".getBytes(StandardCharsets.UTF_8))
                .build();
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            say("ERROR - not connected within 30s");
            System.exit(1);
        }
        say("READY");

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.trim().split("\\s+");
            if (f.length == 0 || f[0].isEmpty()) {
                continue;
            }
            try {
                switch (f[0]) {
                    case "mutex":
                        start(f[1], mutex(new InterProcessMutex(client, f[2])));
                        break;
                    case "rw-read":
                        start(f[1], mutex(new InterProcessReadWriteLock(client, f[2]).readLock()));
                        break;
                    case "rw-write":
                        start(f[1], mutex(new InterProcessReadWriteLock(client, f[2]).writeLock()));
                        break;
                    case "semaphore":
                        start(f[1], semaphore(client, f[2], Integer.parseInt(f[3])));
                        break;
                    case "latch":
                        startLatch(client, f[1], f[2]);
                        break;
                    case "leader": {
                        LeaderLatch l = latches.get(f[1]);
                        if (l == null) {
                            say("ERROR " + f[1] + " no latch");
                        } else {
                            String p = l.getOurPath();
                            say("LEADER " + f[1] + " " + l.hasLeadership() + " "
                                    + (p == null ? "-" : ZKPaths.getNodeFromPath(p)));
                        }
                        break;
                    }
                    case "release": {
                        Handle h = handles.get(f[1]);
                        boolean latchWaiting = h != null && latches.containsKey(f[1]) && h.state.equals("waiting");
                        if (h == null || !(h.state.equals("acquired") || latchWaiting)) {
                            say("ERROR " + f[1] + " not acquired");
                        } else {
                            h.cmds.add("release");
                        }
                        break;
                    }
                    case "member": {
                        GroupMember m = new GroupMember(client, f[2], f[3], f[4].getBytes(StandardCharsets.UTF_8));
                        m.start();
                        members.put(f[1], m);
                        say("JOINED " + f[1]);
                        break;
                    }
                    case "members": {
                        java.util.TreeSet<String> ids = new java.util.TreeSet<>(members.get(f[1]).getCurrentMembers().keySet());
                        say("MEMBERS " + f[1] + " " + String.join(",", ids));
                        break;
                    }
                    case "mleave":
                        members.remove(f[1]).close();
                        say("MLEFT " + f[1]);
                        break;
                    case "status": {
                        Handle h = handles.get(f[1]);
                        say("STATUS " + f[1] + " " + (h == null ? "unknown" : h.state));
                        break;
                    }
                    case "shared-add": {
                        String id = f[1], path = f[2];
                        int delta = Integer.parseInt(f[3]), times = Integer.parseInt(f[4]);
                        counter(id, f[0], () -> sharedAdd(client, id, path, delta, times));
                        break;
                    }
                    case "shared-get": {
                        String id = f[1], path = f[2];
                        counter(id, f[0], () -> {
                            try (SharedCount sc = new SharedCount(client, path, 0)) {
                                sc.start();
                                return "SHARED " + id + " " + sc.getCount();
                            }
                        });
                        break;
                    }
                    case "long-add": {
                        String id = f[1], path = f[2], lock = f[5];
                        long delta = Long.parseLong(f[3]);
                        int times = Integer.parseInt(f[4]);
                        counter(id, f[0], () -> longAdd(client, id, path, delta, times, lock));
                        break;
                    }
                    case "long-get": {
                        String id = f[1], path = f[2];
                        counter(id, f[0], () -> "LONG " + id + " "
                                + new DistributedAtomicLong(client, path, new RetryNTimes(3, 1)).get().postValue());
                        break;
                    }
                    case "barrier-set": {
                        String id = f[1], path = f[2];
                        counter(id, f[0], () -> {
                            new DistributedBarrier(client, path).setBarrier();
                            return "BARRIER " + id + " set";
                        });
                        break;
                    }
                    case "barrier-remove": {
                        String id = f[1], path = f[2];
                        counter(id, f[0], () -> {
                            new DistributedBarrier(client, path).removeBarrier();
                            return "BARRIER " + id + " removed";
                        });
                        break;
                    }
                    case "barrier-wait": {
                        String id = f[1], path = f[2];
                        long seconds = Long.parseLong(f[3]);
                        counter(id, f[0], () -> "BWAITED " + id + " "
                                + new DistributedBarrier(client, path).waitOnBarrier(seconds, TimeUnit.SECONDS));
                        break;
                    }
                    case "dbarrier":
                        doubleBarriers.put(f[1], new DistributedDoubleBarrier(client, f[2], Integer.parseInt(f[3])));
                        say("DBARRIER " + f[1]);
                        break;
                    case "denter": {
                        String id = f[1];
                        long seconds = Long.parseLong(f[2]);
                        DistributedDoubleBarrier b = doubleBarriers.get(id);
                        counter(id, f[0], () -> "DENTERED " + id + " " + b.enter(seconds, TimeUnit.SECONDS));
                        break;
                    }
                    case "dleave": {
                        String id = f[1];
                        long seconds = Long.parseLong(f[2]);
                        DistributedDoubleBarrier b = doubleBarriers.get(id);
                        counter(id, f[0], () -> "DLEFT " + id + " " + b.leave(seconds, TimeUnit.SECONDS));
                        break;
                    }
                    case "exit":
                        client.close();
                        say("BYE");
                        System.exit(0);
                        break;
                    default:
                        say("ERROR - unknown command: " + line);
                }
            } catch (ArrayIndexOutOfBoundsException | NumberFormatException e) {
                say("ERROR - bad command: " + line);
            }
        }
        client.close();
        System.exit(0);
    }
}
