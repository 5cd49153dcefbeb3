// @ts-check
// Tests of the Node client against a real gateway. Run by
// scripts/test-clients.sh, which starts one and sets ZKGATE_URL:
//
//   ZKGATE_URL=http://127.0.0.1:8080 node --test client/node/test/

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import http from "node:http";
import net from "node:net";
import { afterEach, beforeEach, describe, test } from "node:test";

import * as zk from "../index.js";

const URL = process.env.ZKGATE_URL;
if (!URL) throw new Error("ZKGATE_URL is not set: run scripts/test-clients.sh, which starts a gateway for these tests");

// Bounds of the waits in these tests: generous, since they only end a test that fails.
const PATIENCE = 20_000;

const unique = (/** @type {string} */ prefix) => `${prefix}-${randomUUID().slice(0, 10)}`;
const gate = new zk.Gateway({ url: URL });

/** @param {number} ms */
const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * @param {string} what
 * @param {() => boolean} cond
 */
async function eventually(what, cond, within = PATIENCE) {
  const deadline = Date.now() + within;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`not true within ${within} ms: ${what}`);
    await pause(20);
  }
}

/**
 * Resolves when the signal aborts, or rejects after ms.
 * @param {AbortSignal} signal
 * @param {number} ms
 */
function aborted(signal, ms = PATIENCE) {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return resolve(signal.reason);
    const t = setTimeout(() => reject(new Error(`not aborted within ${ms} ms`)), ms);
    signal.addEventListener("abort", () => {
      clearTimeout(t);
      resolve(signal.reason);
    }, { once: true });
  });
}

/** Ends a lease as another client would. @param {string} id */
async function revokeElsewhere(id) {
  const res = await fetch(`${URL}/v1/leases/${id}`, { method: "DELETE" });
  assert.equal(res.status, 204);
}

// The client's timers (keepalives, timeouts, pauses between retries), found
// by where they were set: none may outlive a test. Unref'd timers keep no
// process alive, so only this finds one that was never cleared.
/** @type {Set<unknown>} */
const clientTimers = new Set();
const realSetTimeout = globalThis.setTimeout;
const realClearTimeout = globalThis.clearTimeout;
Object.assign(globalThis, {
  setTimeout(/** @type {(...a: unknown[]) => void} */ fn, /** @type {number} */ ms, /** @type {unknown[]} */ ...args) {
    const ours = new Error().stack?.includes("/client/node/index.js");
    /** @type {unknown} */
    const h = realSetTimeout(() => {
      clientTimers.delete(h);
      fn(...args);
    }, ms);
    if (ours) clientTimers.add(h);
    return h;
  },
  clearTimeout(/** @type {any} */ h) {
    clientTimers.delete(h);
    realClearTimeout(h);
  },
});
globalThis.clearTimeout = /** @type {any} */ ((/** @type {any} */ h) => {
  clientTimers.delete(h);
  realClearTimeout(h);
});

/**
 * A TCP proxy to the gateway that can refuse connections or drop one answer,
 * to test exactly the failures those cause.
 */
class Proxy {
  down = false;
  dropNext = false;
  dropped = false;
  /** @type {(() => void)[] | undefined} what the gateway sent while answers are held, in order */
  held;
  /** @type {Set<net.Socket>} */
  sockets = new Set();

  /** Holds back the gateway's answers (the requests still reach it) until releaseAnswers(). */
  holdAnswers() {
    this.held = [];
  }

  releaseAnswers() {
    const held = this.held;
    this.held = undefined;
    for (const send of held ?? []) send();
  }

  /** Refuses new connections and breaks those open (fetch keeps connections alive). */
  goDown() {
    this.down = true;
    for (const s of this.sockets) s.destroy();
  }

  /** @param {string} upstream */
  constructor(upstream) {
    const u = new globalThis.URL(upstream);
    this.server = net.createServer((client) => {
      if (this.down) {
        client.destroy();
        return;
      }
      const drop = this.dropNext;
      this.dropNext = false;
      const up = net.connect(Number(u.port), u.hostname);
      for (const s of [client, up]) {
        this.sockets.add(s);
        s.on("close", () => this.sockets.delete(s));
        s.on("error", () => { client.destroy(); up.destroy(); });
      }
      client.pipe(up);
      const toClient = (/** @type {() => void} */ send) => (this.held ? this.held.push(send) : send());
      up.on("data", (chunk) => {
        if (drop) {
          // The gateway has answered: lose the answer with the connection.
          this.dropped = true;
          client.destroy();
          up.destroy();
          return;
        }
        toClient(() => client.write(chunk));
      });
      up.on("end", () => toClient(() => client.end()));
    });
  }

  /** @returns {Promise<string>} the proxy's URL */
  listen() {
    return new Promise((resolve) => {
      this.server.listen(0, "127.0.0.1", () => {
        const a = /** @type {net.AddressInfo} */ (this.server.address());
        resolve(`http://127.0.0.1:${a.port}`);
      });
    });
  }

  close() {
    for (const s of this.sockets) s.destroy();
    return new Promise((resolve) => this.server.close(() => resolve(undefined)));
  }
}

/**
 * Runs fn with a proxy in front of the gateway and a client of the proxy
 * (given options besides its url), and closes the proxy after.
 * @param {Omit<zk.GatewayOptions, "url">} options
 * @param {(proxy: Proxy, g: zk.Gateway) => Promise<void>} fn
 */
const throughProxy = async (options, fn) => {
  const proxy = new Proxy(URL);
  const g = new zk.Gateway({ url: await proxy.listen(), ...options });
  try {
    await fn(proxy, g);
  } finally {
    await proxy.close();
  }
};

beforeEach(() => clientTimers.clear());
afterEach(async () => {
  await eventually(`no timer of the client left (${clientTimers.size})`, () => clientTimers.size === 0);
});

describe("durations and errors", () => {
  test("parseDuration and formatDuration", () => {
    assert.equal(zk.parseDuration("15s"), 15_000);
    assert.equal(zk.parseDuration("1h2m3.5s"), 3_723_500);
    assert.equal(zk.parseDuration("500ms"), 500);
    assert.equal(zk.parseDuration("0"), 0);
    assert.equal(zk.parseDuration(250), 250);
    for (const bad of ["", "15", "s", "-1s", "1x", "1s2", ".s", -5, NaN]) {
      assert.throws(() => zk.parseDuration(bad), zk.InvalidRequest, String(bad));
    }
    assert.equal(zk.formatDuration(15_000), "15s");
    assert.equal(zk.formatDuration(1500), "1500ms");
  });

  test("problem codes map to classes", () => {
    /** @type {[number, string, typeof zk.ZkgateError][]} */
    const cases = [
      [401, "unauthenticated", zk.Unauthenticated],
      [403, "forbidden", zk.Forbidden],
      [429, "too_many", zk.TooMany],
      [507, "queue_full", zk.QueueFull],
      [503, "unavailable", zk.Unavailable],
      [410, "lease_expired", zk.LeaseExpired],
      [409, "would_deadlock", zk.WouldDeadlock],
      [409, "deadlock", zk.Deadlock],
    ];
    for (const [status, code, Cls] of cases) {
      const body = new TextEncoder().encode(JSON.stringify({ type: `urn:zkgate:problem:${code}`, title: "t", status, detail: "why", code }));
      const err = zk.errorFrom(status, "application/problem+json", body, "3");
      assert.ok(err instanceof Cls, code);
      assert.deepEqual([err.status, err.code, err.detail, err.retryAfter, err.name], [status, code, "why", 3, Cls.name]);
    }
    const proxyErr = zk.errorFrom(502, "text/html", new TextEncoder().encode("<html>bad gateway</html>"), null);
    assert.ok(proxyErr instanceof zk.Unavailable);
    assert.match(proxyErr.detail, /bad gateway/);
    assert.ok(zk.errorFrom(404, "application/problem+json", new TextEncoder().encode('{"code":"lease_not_found"}'), null) instanceof zk.LeaseLost);
  });
});

describe("leases", () => {
  test("a lease is revoked at the end", async () => {
    const lease = await gate.lease({ ttl: "10s", holder: "node-test" });
    const info = await gate.leaseInfo(lease.id);
    assert.deepEqual([info.holder, info.ttl, lease.ttl], ["node-test", "10s", 10_000]);
    await lease[Symbol.asyncDispose]();
    await assert.rejects(gate.leaseInfo(lease.id), (/** @type {any} */ e) => e instanceof zk.LeaseExpired && e.reason === "revoked");
    assert.equal(lease.lost, false);
    await lease.revoke(); // a second revoke is nothing
  });

  test("the keepalive outlives the TTL", async () => {
    const lease = await gate.lease({ ttl: "2s" });
    try {
      // Three TTLs pass: the lease lives only if the keepalive kept it alive.
      await pause(6000);
      assert.equal(lease.lost, false, String(lease.error));
      assert.equal((await gate.leaseInfo(lease.id)).id, lease.id);
      lease.check();
    } finally {
      await lease.revoke();
    }
  });

  test("a lost lease aborts its signal and throws where it is used", async () => {
    /** @type {zk.LeaseLost[]} */
    const seen = [];
    const lease = await gate.lease({ ttl: "3s", onLost: (e) => seen.push(e) });
    const name = unique("held");
    const other = await gate.lease();
    try {
      await other.lock(name);
      // A wait under way is cancelled by the loss, at once.
      const waiting = assert.rejects(lease.lock(name, { wait: "1m" }), zk.LeaseLost);
      await revokeElsewhere(lease.id);
      const reason = await aborted(lease.signal);
      assert.ok(reason instanceof zk.LeaseExpired);
      await waiting;
      assert.equal(seen.length, 1);
      assert.equal(lease.lost, true);
      assert.throws(() => lease.check(), zk.LeaseExpired);
      await assert.rejects(lease.semaphore(unique("sem"), 1), zk.LeaseLost);
      await assert.rejects(lease[Symbol.asyncDispose](), zk.LeaseLost);
    } finally {
      await other.revoke();
    }
  });

  test("a lease is lost when no keepalive is answered within its TTL", async () => {
    await throughProxy({ retryFor: 1000 }, async (proxy, g) => {
      const lease = await g.lease({ ttl: "2s" });
      proxy.goDown();
      const reason = await aborted(lease.signal);
      // No answer within the TTL: lost, though the gateway never said so.
      assert.equal(/** @type {Error} */ (reason).constructor, zk.LeaseLost);
      await assert.rejects(lease.lock(unique("x")), zk.LeaseLost);
      await assert.rejects(lease.revoke(), zk.LeaseLost);
    });
  });

  test("a short outage is ridden out", async () => {
    await throughProxy({}, async (proxy, g) => {
      const lease = await g.lease({ ttl: "4s" });
      proxy.goDown();
      await pause(2000); // a keepalive fails (one is due every 1.33 s)
      proxy.down = false;
      await pause(4000);
      assert.equal(lease.lost, false, String(lease.error));
      assert.equal((await gate.leaseInfo(lease.id)).id, lease.id);
      await lease.revoke();
    });
  });

  test("unknown and malformed lease ids", async () => {
    await assert.rejects(gate.leaseInfo(randomUUID()), (/** @type {any} */ e) => e instanceof zk.LeaseNotFound && e.status === 404);
    await assert.rejects(gate.leaseInfo("not-a-lease-id"), (/** @type {any} */ e) => e instanceof zk.InvalidRequest && e.status === 400);
    await assert.rejects(gate.lease({ ttl: "100ms" }), zk.InvalidRequest); // below the gateway's 1s
  });
});

describe("a lease made elsewhere, by its id", () => {
  /** Makes a lease as another client would, which does not keep it alive. @param {string} ttl @returns {Promise<string>} */
  async function madeElsewhere(ttl) {
    const res = await fetch(`${URL}/v1/leases`, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ ttl, holder: "elsewhere" }),
    });
    assert.equal(res.status, 201);
    return /** @type {{id: string}} */ (await res.json()).id;
  }

  test("kept alive and revoked by another client", async () => {
    const id = await madeElsewhere("2s");
    const other = new zk.Gateway({ url: URL });
    const lease = other.leaseById(id);
    assert.deepEqual([lease.id, lease.ttl, lease.deadline], [id, 0, Infinity]);
    assert.equal(clientTimers.size, 0, "a lease by id keeps nothing alive");
    // Kept alive by the other client past its TTL, by the lease and by its id.
    const until = performance.now() + 3000;
    while (performance.now() < until) {
      assert.equal((await lease.keepAlive()).id, id);
      assert.equal((await other.keepAlive(id)).holder, "elsewhere");
      await pause(400); // a keepalive's pace, well within the TTL
    }
    lease.check();
    // Every call acts for it: a claim acked, a lock held.
    const q = unique("byid");
    const name = unique("byid");
    await gate.produce(q, "x");
    const item = await lease.claim(q);
    assert.ok(item);
    await item.ack();
    await lease.lock(name);
    const holds = (await gate.leaseInfo(id)).holds.map((h) => `${h.kind} ${h.name}`);
    assert.deepEqual(holds, [`lock ${name}`]);
    // Revoked by the other client: what it held is free, the gateway says revoked.
    await lease.revoke();
    await assert.rejects(gate.leaseInfo(id), (/** @type {any} */ e) => e instanceof zk.LeaseExpired && e.reason === "revoked");
    const { state } = await gate.state("locks", name);
    assert.deepEqual(state.holders, []);
    assert.throws(() => lease.check(), zk.LeaseExpired);
    await gate.deleteQueue(q);
  });

  test("revokeLease by id ends a handle, which learns it at its next call", async () => {
    const id = await madeElsewhere("5s");
    const lease = gate.leaseById(id);
    await gate.revokeLease(id);
    await assert.rejects(lease.claim(unique("byid")), (/** @type {any} */ e) => e instanceof zk.LeaseExpired && e.reason === "revoked");
    assert.equal(lease.lost, true);
    assert.ok(lease.signal.aborted);
    await assert.rejects(gate.revokeLease(id), zk.LeaseExpired); // ended already
    assert.throws(() => gate.leaseById("../leases"), zk.InvalidRequest);
  });
});

describe("locks", () => {
  test("token, fence, timeout with holders, idempotent acquire", async () => {
    const name = unique("invoices");
    const a = await gate.lease();
    const b = await gate.lease();
    try {
      const grant = await a.lock(name, { wait: "5s" });
      assert.ok(grant.token > 0);
      assert.deepEqual([grant.name, grant.mode], [name, "exclusive"]);
      assert.equal(await grant.isCurrent(), true);
      await assert.rejects(b.lock(name), (/** @type {any} */ e) => {
        assert.ok(e instanceof zk.Timeout);
        assert.deepEqual(e.problem.holders?.map((/** @type {zk.Holder} */ h) => h.lease), [a.id]);
        return true;
      });
      // One lease is one holder: asking again through it is refused.
      await assert.rejects(a.lock(name), zk.AlreadyHeld);
      await grant[Symbol.asyncDispose]();
      assert.equal(await gate.fence(name, grant.token), false);
      const later = await b.lock(name, { wait: "5s" });
      assert.ok(later.token > grant.token);
      await later.release();
    } finally {
      await a.revoke();
      await b.revoke();
    }
  });

  test("a set of locks is all or nothing", async () => {
    const [x, y, w] = [unique("acct-x"), unique("acct-y"), unique("acct-w")];
    const a = await gate.lease();
    const b = await gate.lease();
    try {
      const held = await a.lockAll([{ name: y, mode: "write" }, x], { wait: "5s" });
      assert.deepEqual(held.grants.map((g) => g.name), [x, y].sort());
      await assert.rejects(a.lock(x), zk.AlreadyHeld);
      // b's set, crossing a's, times out on a lock a holds, holding none of its own.
      await assert.rejects(b.lockAll([y, w, x], { wait: "300ms" }), (/** @type {any} */ e) => {
        assert.ok(e instanceof zk.Timeout);
        assert.ok([x, y].includes(String(e.problem.lock)));
        return true;
      });
      const { state: st } = await gate.state("locks", w);
      assert.deepEqual(st.holders, []);
      await held[Symbol.asyncDispose]();
      const later = await b.lockAll([w, x, y], { wait: "5s" });
      assert.equal(later.grants.length, 3);
      await later.release();
      await assert.rejects(a.lockAll([x, { name: x, mode: "read" }]), zk.InvalidRequest);
    } finally {
      await a.revoke();
      await b.revoke();
    }
  });

  test("contenders hold the lock one after the other, never together", async () => {
    const name = unique("serial");
    let inside = 0;
    let most = 0;
    const worker = async () => {
      const lease = await gate.lease();
      try {
        for (let i = 0; i < 3; i++) {
          const g = await lease.lock(name, { wait: "20s" });
          inside++;
          most = Math.max(most, inside);
          await pause(10); // hold it a moment, so that an overlap would show
          inside--;
          await g.release();
        }
      } finally {
        await lease.revoke();
      }
    };
    await Promise.all([worker(), worker(), worker()]);
    assert.equal(most, 1);
  });

  test("an AbortSignal cancels a wait, and the waiter leaves the queue", async () => {
    const name = unique("cancel");
    const a = await gate.lease();
    const b = await gate.lease();
    try {
      await a.lock(name);
      const ctl = new AbortController();
      const waiting = assert.rejects(b.lock(name, { wait: "1m", signal: ctl.signal }), (/** @type {any} */ e) => e.name === "AbortError");
      let waiters = 0;
      const deadline = Date.now() + PATIENCE;
      while (waiters === 0 && Date.now() < deadline) waiters = (await gate.state("locks", name)).state.waiters.length;
      assert.equal(waiters, 1);
      ctl.abort();
      await waiting;
      for (;;) {
        const { state } = await gate.state("locks", name);
        if (state.waiters.length === 0) break;
        if (Date.now() > deadline) assert.fail("the cancelled waiter stayed in the queue");
        await pause(20);
      }
      assert.equal(b.lost, false);
    } finally {
      await a.revoke();
      await b.revoke();
    }
  });

  test("a lost answer is retried to the same grant", async () => {
    const name = unique("retried");
    await throughProxy({}, async (proxy, g) => {
      const lease = await g.lease();
      proxy.dropNext = true;
      const grant = await lease.lock(name, { wait: "5s" });
      assert.equal(proxy.dropped, true, "the proxy dropped no answer");
      const { state } = await gate.state("locks", name);
      assert.deepEqual(state.holders.map((h) => [h.lease, h.token]), [[lease.id, grant.token]]);
      assert.deepEqual(state.waiters, []);
      await lease.revoke();
    });
  });

  test("read/write locks, and bad input refused before sending", async () => {
    const name = unique("catalog");
    const [a, b, c] = await Promise.all([gate.lease(), gate.lease(), gate.lease()]);
    try {
      await a.lock(name, { mode: "read" });
      await b.lock(name, { mode: "read" });
      const { state, index } = await gate.state("locks", name);
      assert.equal(state.holders.length, 2);
      assert.ok(index > 0);
      await assert.rejects(c.lock(name, { mode: "write" }), zk.Timeout);
      await a.release("lock", name);
      await b.release("lock", name);
      assert.equal((await c.lock(name, { mode: "write", wait: "5s" })).mode, "write");
      for (const bad of ["", ".", "..", "a/b", "x".repeat(201), "späße"]) {
        await assert.rejects(c.lock(bad), (/** @type {any} */ e) => e instanceof zk.InvalidRequest && e.status === undefined, bad);
      }
      // @ts-expect-error: not a mode
      await assert.rejects(c.lock(name, { mode: "shared" }), zk.InvalidRequest);
    } finally {
      await Promise.all([a.revoke(), b.revoke(), c.revoke()]);
    }
  });
});

describe("lists", () => {
  test("every page is read, or the first limit items", async () => {
    const prefix = unique("paged");
    const paged = new zk.Gateway({ url: URL, pageSize: 2 }); // the gateway's pages, 2 long
    const lease = await gate.lease({ holder: "pager" });
    try {
      for (let i = 0; i < 5; i++) await lease.lock(`${prefix}-${i}`);
      const names = (await paged.list("locks", { prefix })).map((l) => l.name);
      assert.deepEqual(names, [0, 1, 2, 3, 4].map((i) => `${prefix}-${i}`));
      const first = (await paged.list("locks", { prefix, limit: 3 })).map((l) => l.name);
      assert.deepEqual(first, names.slice(0, 3));
      assert.ok((await paged.leases()).some((l) => l.id === lease.id));
      await assert.rejects(paged.list(/** @type {any} */ ("nodes")), zk.InvalidRequest);
      await assert.rejects(paged.list("queues", { prefix: "x" }), zk.InvalidRequest);
      await assert.rejects(paged.list("locks", { limit: 0 }), zk.InvalidRequest);
    } finally {
      await lease.revoke();
    }
  });
});

describe("semaphores, elections, barriers", () => {
  test("semaphore slots", async () => {
    const name = unique("gpu");
    const [a, b, c] = await Promise.all([gate.lease(), gate.lease(), gate.lease()]);
    try {
      const s1 = await a.semaphore(name, 2);
      const s2 = await b.semaphore(name, 2);
      assert.notEqual(s1.token, s2.token);
      assert.equal(s1.limit, 2);
      await assert.rejects(c.semaphore(name, 2), zk.Timeout);
      await assert.rejects(c.semaphore(name, 3), (/** @type {any} */ e) => e instanceof zk.LimitMismatch && e.problem.limit === 2);
      await s1.release();
      await (await c.semaphore(name, 2, { wait: "5s" })).release();
      await assert.rejects(c.release("semaphore", name), zk.NotHeld);
    } finally {
      await Promise.all([a.revoke(), b.revoke(), c.revoke()]);
    }
  });

  test("campaign, proclaim, resign, observe", async () => {
    const name = unique("scheduler");
    const ctl = new AbortController();
    /** @type {(string | null)[]} */
    const seen = [];
    const observing = (async () => {
      try {
        for await (const state of gate.observe(name, { wait: "2s", signal: ctl.signal })) {
          seen.push(state.leader ? state.leader.value ?? "" : null);
        }
      } catch (e) {
        if (!ctl.signal.aborted) throw e;
      }
    })();
    const a = await gate.lease();
    const b = await gate.lease();
    try {
      const first = await a.campaign(name, { value: "10.0.0.5:8080", wait: "5s" });
      assert.equal(first.elected, true);
      assert.ok(first.token);
      const second = await b.campaign(name, { value: "10.0.0.6:8080" });
      assert.deepEqual([second.elected, second.position, second.leader?.lease], [false, 1, a.id]);
      await assert.rejects(second.proclaim("me"), zk.NotLeader);
      await first.proclaim("10.0.0.5:9090");
      await eventually(`proclaimed value seen: ${seen}`, () => seen.includes("10.0.0.5:9090"));
      await first[Symbol.asyncDispose]();
      const again = await b.campaign(name, { value: "10.0.0.6:8080", wait: "5s" });
      assert.equal(again.elected, true);
      assert.ok(/** @type {number} */ (again.token) > /** @type {number} */ (first.token));
      await eventually(`new leader seen: ${seen}`, () => seen.at(-1) === "10.0.0.6:8080");
      await again.resign();
      await eventually(`no leader seen: ${seen}`, () => seen.at(-1) === null);
    } finally {
      ctl.abort();
      await observing;
      await a.revoke();
      await b.revoke();
    }
  });

  test("barrier", async () => {
    const name = unique("deploy");
    await gate.waitBarrier(name); // never raised: down
    assert.equal(await gate.raiseBarrier(name), true);
    assert.equal(await gate.raiseBarrier(name), false);
    await assert.rejects(gate.waitBarrier(name), (/** @type {any} */ e) => e instanceof zk.Timeout && e.problem.raised === true);
    const waiting = gate.waitBarrier(name, { wait: "20s" });
    await gate.lowerBarrier(name);
    await waiting;
    assert.equal((await gate.state("barriers", name)).state.raised, false);
  });

  test("double barrier", async () => {
    const name = unique("batch");
    // Both answers read, then leave: a member that leaves first deletes
    // its node, which the other's answer would not list.
    /** @type {() => void} */
    let oneIn = () => {};
    let waiting = 2;
    const bothIn = new Promise((resolve) => {
      oneIn = () => {
        if (--waiting === 0) resolve(undefined);
      };
    });
    const member = async (/** @type {string} */ tag) => {
      const lease = await gate.lease();
      try {
        const m = await lease.enter(name, 2, { member: tag, wait: "20s" }).finally(oneIn);
        const n = m.members.length;
        await bothIn;
        await m[Symbol.asyncDispose]();
        return n;
      } finally {
        await lease.revoke();
      }
    };
    assert.deepEqual(await Promise.all([member("host-a"), member("host-b")]), [2, 2]);
    const lease = await gate.lease();
    try {
      await assert.rejects(lease.enter(name, 2), (/** @type {any} */ e) => e instanceof zk.Timeout && e.problem.count === 2);
      await assert.rejects(lease.enter(name, 3), zk.CountMismatch);
    } finally {
      await lease.revoke();
    }
  });
});

describe("groups", () => {
  test("join, list, a blocking read, leave", async () => {
    const name = unique("workers");
    assert.deepEqual((await gate.state("groups", name)).state.members, []);
    const a = await gate.lease({ holder: "a" });
    const b = await gate.lease({ holder: "b" });
    try {
      const m = await a.join(name, { member: "w1", value: "10.0.0.1:80" });
      assert.equal(m.member, "w1");
      assert.equal(m.members.length, 1);
      await a.join(name, { member: "w1", value: "10.0.0.1:80" }); // again: the same member
      await assert.rejects(b.join(name, { member: "w1" }), zk.InvalidRequest);
      const other = await b.join(name);
      assert.equal(other.member, b.id);
      const { state, index } = await gate.state("groups", name);
      assert.deepEqual(state.members.map((x) => x.member).sort(), ["w1", b.id].sort());
      assert.ok((await gate.list("groups")).some((g) => g.name === name));
      await other.leave();
      const after = await gate.state("groups", name, { index, wait: "20s" });
      assert.deepEqual(after.state.members.map((x) => x.value), ["10.0.0.1:80"]);
      await m[Symbol.asyncDispose]();
      await assert.rejects(a.leaveGroup(name, { member: "w1" }), zk.NotHeld);
    } finally {
      await a.revoke();
      await b.revoke();
    }
  });
});

describe("counters", () => {
  test("read, add, set, compare-and-set, formats", async () => {
    const name = unique("hits");
    let { state, index } = await gate.counter(name);
    assert.deepEqual([state.value, state.version], [0, -1]);
    assert.equal((await gate.addCounter(name, 5)).value, 5);
    assert.equal((await gate.addCounter(name, -2)).value, 3);
    ({ index } = await gate.counter(name));
    const changed = pause(200).then(() => gate.addCounter(name, 1));
    ({ state } = await gate.counter(name, { index, wait: "20s" }));
    await changed;
    assert.equal(state.value, 4);
    await assert.rejects(gate.setCounter(name, 10, { version: 0 }), (e) =>
      e instanceof zk.VersionMismatch && e.problem.value === 4 && e.problem.version === 2);
    assert.equal((await gate.setCounter(name, 10, { version: 2 })).version, 3);
    const shared = unique("shared");
    assert.equal((await gate.setCounter(shared, 2 ** 31 - 1, { format: "int32" })).format, "int32");
    await assert.rejects(gate.counter(shared), zk.FormatMismatch);
    await assert.rejects(gate.addCounter(shared, 1, { format: "int32" }), zk.OutOfRange);
    await assert.rejects(gate.counter(shared, { format: /** @type {any} */ ("hex") }), zk.InvalidRequest);
    assert.ok((await gate.list("counters")).some((c) => c.name === name && c.values.decimal === 10));
    await gate.deleteCounter(name);
    await gate.deleteCounter(shared);
    assert.equal((await gate.counter(name)).state.version, -1);
  });
});

describe("queues", () => {
  test("consume acks after the body and nacks on a throw", async () => {
    const q = unique("emails");
    for (let i = 0; i < 3; i++) await gate.produce(q, `mail ${i}`);
    /** @type {string[]} */
    const done = [];
    const lease = await gate.lease();
    try {
      await assert.rejects((async () => {
        for await (const item of lease.consume(q, { wait: "0s", untilEmpty: true })) {
          if (item.text === "mail 1") throw new Error("cannot send mail 1");
          done.push(item.text);
        }
      })(), /cannot send mail 1/);
      // mail 1 was given back: it is served again, first.
      for await (const item of lease.consume(q, { wait: "0s", untilEmpty: true })) done.push(item.text);
    } finally {
      await lease.revoke();
    }
    assert.deepEqual(done, ["mail 0", "mail 1", "mail 2"]);
    const { state } = await gate.state("queues", q);
    assert.deepEqual([state.length, state.claimed], [0, 0]);
    await gate.deleteQueue(q);
  });

  test("break gives the item back unless acked", async () => {
    const q = unique("jobs");
    await gate.produce(q, new Uint8Array([0, 1, 98]), { priority: 5 });
    await gate.produce(q, "second");
    const lease = await gate.lease();
    try {
      for await (const item of lease.consume(q, { wait: "0s" })) {
        assert.deepEqual([[...item.data], item.priority], [[0, 1, 98], 5]);
        break;
      }
      for await (const item of lease.consume(q, { wait: "0s" })) {
        assert.deepEqual([...item.data], [0, 1, 98]); // served again
        await item.ack();
        break;
      }
      const left = [];
      for await (const item of lease.consume(q, { wait: "0s", untilEmpty: true })) left.push(item.text);
      assert.deepEqual(left, ["second"]);
    } finally {
      await lease.revoke();
    }
  });

  test("take, claim, ack, nack", async () => {
    const q = unique("work");
    assert.equal(await gate.take(q), null);
    const made = await gate.produce(q, "one");
    await gate.produce(q, "two");
    const taken = await gate.take(q, { wait: "1s" });
    assert.deepEqual([taken?.id, taken?.text], [made.id, "one"]);
    const [a, b] = await Promise.all([gate.lease(), gate.lease()]);
    try {
      const claim = await a.claim(q);
      assert.equal(claim?.text, "two");
      assert.equal(await b.claim(q), null); // hidden from others
      await assert.rejects(b.ack(q, /** @type {zk.Claim} */ (claim).id), zk.NotClaimed);
      await claim?.nack();
      const again = await b.claim(q, { wait: "1s" });
      assert.equal(again?.id, claim?.id);
      await again?.ack();
    } finally {
      await Promise.all([a.revoke(), b.revoke()]);
    }
    const late = gate.take(q, { wait: "20s" });
    await gate.produce(q, "late");
    assert.equal((await late)?.text, "late");
    await gate.deleteQueue(q);
  });

  test("a delayed item is served once due", async () => {
    const q = unique("later");
    const made = await gate.produce(q, "due", { delay: "500ms", priority: 3 });
    assert.ok(made.id.startsWith("due-") && made.not_before, JSON.stringify(made));
    const due = Date.parse(/** @type {string} */ (made.not_before));
    const { state } = await gate.state("queues", q);
    if (Date.now() < due) assert.deepEqual([state.length, state.delayed], [0, 1]);
    const item = await gate.take(q, { wait: "20s" });
    assert.deepEqual([item?.text, item?.priority], ["due", 3]);
    assert.ok(Date.now() >= due, "taken before its due time");
    const at = new Date(Date.now() + 300);
    assert.ok((await gate.produce(q, "at", { notBefore: at })).id.startsWith("due-"));
    assert.equal((await gate.take(q, { wait: "20s" }))?.text, "at");
    await assert.rejects(gate.produce(q, "x", { delay: "1s", notBefore: at }), zk.InvalidRequest);
    await assert.rejects(gate.produce(q, "x", { delay: "721h" }), zk.InvalidRequest);
    await gate.deleteQueue(q);
  });

  test("consume stops with the lease's loss", async () => {
    const q = unique("orphan");
    await gate.produce(q, "x");
    const lease = await gate.lease({ ttl: "3s" });
    await assert.rejects((async () => {
      for await (const item of lease.consume(q, { wait: "0s" })) {
        void item;
        await revokeElsewhere(lease.id);
        await aborted(lease.signal);
      }
    })(), zk.LeaseExpired);
    // The claim ended with the lease: the item is served again.
    assert.equal((await gate.take(q, { wait: "5s" }))?.text, "x");
  });
});

/**
 * An HTTP server that answers a lease's creation with a promise and
 * X-Zkgate-Lease-Ends of its choosing and every keepalive with a 503 (a
 * suspended ZooKeeper session), and records the revokes.
 * @param {number} promise ms
 * @param {number | undefined} drain ms
 */
async function fakeGateway(promise, drain) {
  const lease = "0b5c6f7e-1a2b-4c3d-8e9f-001122334455";
  const seen = { keepalives: 0, revoked: false };
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      const now = Date.now();
      const stamp = (/** @type {number} */ t) => new Date(t).toISOString();
      if (req.method === "POST" && req.url === "/v1/leases") {
        /** @type {Record<string, string>} */
        const headers = { "Content-Type": "application/json", "X-Zkgate-Time": stamp(now) };
        if (drain !== undefined) headers["X-Zkgate-Lease-Ends"] = stamp(now + drain);
        res.writeHead(201, headers);
        res.end(JSON.stringify({ id: lease, gateway: "g", ttl: "1m", holder: "h", lock_delay: "0s",
          expires_at: stamp(now + promise), created_at: stamp(now), holds: [] }));
      } else if (req.method === "POST" && req.url === `/v1/leases/${lease}/keepalive`) {
        seen.keepalives++;
        res.writeHead(503, { "Content-Type": "application/problem+json", "Retry-After": "1" });
        res.end(JSON.stringify({ type: "urn:zkgate:problem:unavailable", title: "t", status: 503, detail: "suspended", code: "unavailable" }));
      } else if (req.method === "DELETE" && req.url === `/v1/leases/${lease}`) {
        seen.revoked = true;
        res.writeHead(204);
        res.end();
      } else {
        res.writeHead(404);
        res.end();
      }
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(undefined)));
  const a = /** @type {net.AddressInfo} */ (server.address());
  return {
    url: `http://127.0.0.1:${a.port}`,
    seen,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve(undefined)); }),
  };
}

/**
 * An HTTP server that plays one gateway of a handover: it answers a lease's
 * creation, keepalives, lock acquires and releases, and revokes, records each
 * request in `seen` as "name METHOD path", and with `movedTo` set adds
 * X-Zkgate-Lease-Moved-To to every answer about the lease, as a draining
 * gateway does once the lease was handed over.
 * @param {string} name
 * @param {string[]} seen
 * @param {number} promise ms
 */
async function fakeKeeper(name, seen, promise = 1500) {
  const lease = "5d4c3b2a-1a2b-4c3d-8e9f-001122334455";
  /** @type {{movedTo: string | undefined}} */
  const state = { movedTo: undefined };
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      const path = (req.url ?? "").split("?")[0];
      seen.push(`${name} ${req.method} ${path}`);
      const now = Date.now();
      const stamp = (/** @type {number} */ t) => new Date(t).toISOString();
      /** @type {Record<string, string>} */
      const headers = { "Content-Type": "application/json", "X-Zkgate-Time": stamp(now) };
      if (state.movedTo && path !== "/v1/leases") headers["X-Zkgate-Lease-Moved-To"] = state.movedTo;
      const doc = { id: lease, gateway: name, ttl: "1m", holder: "h", lock_delay: "0s",
        expires_at: stamp(now + promise), created_at: stamp(now), holds: [] };
      if (req.method === "POST" && path === "/v1/leases") {
        res.writeHead(201, headers).end(JSON.stringify(doc));
      } else if (req.method === "POST" && path === `/v1/leases/${lease}/keepalive`) {
        res.writeHead(200, headers).end(JSON.stringify(doc));
      } else if (req.method === "POST" && path.endsWith("/acquire")) {
        res.writeHead(200, headers).end(JSON.stringify({ name: path.split("/")[3], mode: "exclusive", lease, token: 42,
          node: "/zkgate/locks/x/_c_1-lock-0000000000", acquired_at: stamp(now) }));
      } else if ((req.method === "POST" && path.endsWith("/release")) || req.method === "DELETE") {
        res.writeHead(204, headers).end();
      } else {
        res.writeHead(404, headers).end("{}");
      }
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(undefined)));
  const a = /** @type {net.AddressInfo} */ (server.address());
  return {
    url: `http://127.0.0.1:${a.port}`,
    state,
    lease,
    /** Stops serving: a connection to its address is refused from then on. */
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve(undefined)); }),
  };
}

describe("handover: a lease's calls follow X-Zkgate-Lease-Moved-To", () => {
  test("to the gateway it names, and back to the gateway's URL when that one refuses the connection", async () => {
    /** @type {string[]} */
    const seen = [];
    // What was seen since then, less the background keepalives.
    const calls = (since = 0) => seen.slice(since).filter((c) => !c.endsWith("/keepalive"));
    const draining = await fakeKeeper("draining", seen);
    const keeper = await fakeKeeper("keeper", seen);
    const keeper2 = await fakeKeeper("keeper2", seen);
    const keepalive = `POST /v1/leases/${draining.lease}/keepalive`;
    try {
      const lease = await new zk.Gateway({ url: draining.url }).lease({ ttl: "1m" });
      assert.equal(lease.url, draining.url);
      draining.state.movedTo = keeper.url;
      const grant = await lease.lock("x");
      assert.equal(lease.url, keeper.url);
      assert.equal(calls().at(-1), "draining POST /v1/locks/x/acquire");
      await grant.release();
      assert.equal(calls().at(-1), "keeper POST /v1/locks/x/release");
      // The keepalives (a third of the way to a promise of 1.5s) follow too.
      await eventually("a keepalive reaches the keeper", () => seen.includes(`keeper ${keepalive}`));
      // The keeper goes away: the lease's calls go to the gateway's URL again,
      // which passes them on (here: answers them).
      draining.state.movedTo = undefined;
      await keeper.close();
      let n = seen.length;
      await (await lease.lock("y")).release();
      assert.equal(lease.url, draining.url);
      assert.deepEqual(calls(n), ["draining POST /v1/locks/y/acquire", "draining POST /v1/locks/y/release"]);
      n = seen.length;
      await eventually("a keepalive reaches the gateway's URL again", () => seen.slice(n).includes(`draining ${keepalive}`));
      assert.equal(lease.lost, false, `the lease was lost: ${lease.error}`);
      // A keepalive that finds the keeper gone falls back by itself.
      draining.state.movedTo = keeper2.url;
      await lease.keepAlive();
      assert.equal(lease.url, keeper2.url);
      draining.state.movedTo = undefined;
      await keeper2.close();
      n = seen.length;
      await eventually("the keepalive falls back to the gateway's URL", () => seen.slice(n).includes(`draining ${keepalive}`));
      assert.equal(lease.url, draining.url);
      assert.equal(lease.lost, false, `the lease was lost: ${lease.error}`);
      draining.state.movedTo = "ftp://elsewhere"; // not a gateway's URL: ignored
      await lease.keepAlive();
      assert.equal(lease.url, draining.url);
      await lease.revoke();
      assert.equal(calls().at(-1), `draining DELETE /v1/leases/${draining.lease}`);
    } finally {
      await draining.close();
    }
  });
});

/**
 * A loopback address whose connection attempts go unanswered (a full accept
 * queue drops them), as to an address out of reach: held by a python3 child
 * (Node accepts every connection it can). stop() ends it.
 */
async function unansweredAddress() {
  const script = [
    "import socket, sys, time",
    "l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen(0)",
    "port = l.getsockname()[1]; fill = []",
    "for _ in range(3):",
    "    s = socket.socket(); s.setblocking(False)",
    "    try: s.connect(('127.0.0.1', port))",
    "    except BlockingIOError: pass",
    "    fill.append(s)",
    "print(port, flush=True); sys.stdin.read()",
  ].join("\n");
  const child = spawn("python3", ["-c", script], { stdio: ["pipe", "pipe", "inherit"] });
  const port = await new Promise((resolve, reject) => {
    child.stdout.once("data", (d) => resolve(String(d).trim()));
    child.once("error", reject);
  });
  return {
    url: `http://127.0.0.1:${port}`,
    stop: () => new Promise((resolve) => { child.once("exit", () => resolve(undefined)); child.stdin.end(); }),
  };
}

describe("handover: a keeper out of reach", () => {
  test("is left within the lease's deadline: its calls go to the gateway's URL", async () => {
    /** @type {string[]} */
    const seen = [];
    // A promise of 6s: a keepalive every 2s, which an unanswered connection
    // attempt left to the system would outlast.
    const draining = await fakeKeeper("draining", seen, 6000);
    const away = await unansweredAddress();
    try {
      const lease = await new zk.Gateway({ url: draining.url }).lease({ ttl: "1m" });
      draining.state.movedTo = away.url;
      const grant = await lease.lock("x");
      draining.state.movedTo = undefined;
      assert.equal(lease.url, away.url);
      await grant.release();
      await (await lease.lock("y")).release();
      assert.equal(lease.url, draining.url);
      assert.equal(lease.lost, false, `the lease was lost: ${lease.error}`);
      assert.ok(seen.includes("draining POST /v1/locks/x/release"), seen.join(", "));
      await lease.revoke();
    } finally {
      await draining.close();
      await away.stop();
    }
  });
});

describe("deadlines: the lease ends where the gateway's promise ends, not at its TTL", () => {
  test("the deadline follows expires_at", async () => {
    const lease = await gate.lease({ ttl: "30s" });
    try {
      // The gateway promises what its ZooKeeper session is known to keep:
      // under its session timeout (10s here), whatever the TTL.
      const first = lease.deadline;
      assert.ok(first - performance.now() > 0 && first - performance.now() < 10_000, `${first - performance.now()} ms ahead`);
      await eventually("a keepalive moves the deadline", () => lease.deadline > first);
      assert.ok(lease.deadline - performance.now() < 10_000);
    } finally {
      await lease.revoke();
    }
  });

  test("a lease ends at its deadline when no keepalive is confirmed, and is revoked", async () => {
    await throughProxy({ retryFor: 1000 }, async (proxy, g) => {
      /** @type {zk.LeaseLost[]} */
      const seen = [];
      const asked = performance.now();
      const lease = await g.lease({ ttl: "30s", onLost: (e) => seen.push(e) });
      proxy.goDown();
      // The lease ends at its deadline: its signal aborts then (PATIENCE is
      // under the TTL, so a lease kept until its TTL fails here). Waited on,
      // not polled: a poll's timer that ran late can see the deadline passed
      // before the timer that ends the lease, due earlier, has run.
      await aborted(lease.signal);
      assert.ok(performance.now() >= lease.deadline, "the lease ended before its deadline");
      assert.ok(lease.deadline - asked < 10_000, "the lease lived as if its TTL of 30s counted");
      const reason = lease.signal.reason;
      assert.equal(reason.constructor, zk.LeaseLost);
      assert.match(reason.message, /no keepalive of lease .* was confirmed before the deadline/);
      assert.deepEqual(seen, [reason]);
      assert.throws(() => lease.check(), zk.LeaseLost);
      // The client revokes the lease at the gateway once it can. The proxy
      // holds back the gateway's answer, so that the lease is revoked there
      // before the client hears so, every time: the client must hear it
      // before the proxy goes, or its revoke retries against a closed port
      // until the lease's TTL, as against any gateway gone for good.
      proxy.holdAnswers();
      proxy.down = false;
      const until = Date.now() + PATIENCE;
      for (;;) {
        const e = await gate.leaseInfo(lease.id).then(() => undefined, (/** @type {unknown} */ err) => err);
        if (e instanceof zk.LeaseExpired && e.reason === "revoked") break;
        if (Date.now() > until) assert.fail(`the lease is not revoked at the gateway: ${e}`);
        await pause(50);
      }
      proxy.releaseAnswers();
      await eventually("the revoke in the background ends once answered", () => clientTimers.size === 0);
      await assert.rejects(lease.revoke(), zk.LeaseLost);
    });
  });

  test("a 503 keepalive confirms nothing, and a drain's end comes first", async () => {
    /** @type {[number, number | undefined][]} */
    const cases = [[30_000, 1500], [1500, undefined]];
    for (const [promise, drain] of cases) {
      const fake = await fakeGateway(promise, drain);
      try {
        const asked = performance.now();
        const lease = await new zk.Gateway({ url: fake.url }).lease({ ttl: "1m" });
        assert.ok(lease.deadline - asked < 2000, `deadline ${lease.deadline - asked} ms after the ask`);
        await aborted(lease.signal);
        assert.ok(performance.now() >= lease.deadline);
        assert.ok(fake.seen.keepalives > 0);
        await eventually("the expired lease is revoked", () => fake.seen.revoked);
      } finally {
        await fake.close();
      }
    }
  });

  test("lockDelay", async () => {
    const lease = await gate.lease({ ttl: "10s", lockDelay: "2s" });
    try {
      assert.equal(lease.lockDelay, 2000);
      assert.equal((await gate.leaseInfo(lease.id)).lock_delay, "2s");
    } finally {
      await lease.revoke();
    }
    await assert.rejects(gate.lease({ lockDelay: "2h" }), zk.InvalidRequest); // above the gateway's --max-lock-delay
  });
});

describe("one lease is one holder", () => {
  /**
   * @param {string} what
   * @param {PromiseSettledResult<unknown>[]} results
   */
  function oneHolder(what, results) {
    assert.equal(results.filter((r) => r.status === "fulfilled").length, 1, what);
    for (const r of results) {
      if (r.status === "fulfilled") continue;
      assert.ok(r.reason instanceof zk.AlreadyHeld, String(r.reason));
      assert.ok(r.reason instanceof zk.InvalidRequest);
      assert.ok(r.reason.message.includes(`already holds (or is acquiring) ${what}`), r.reason.message);
      assert.ok(r.reason.message.includes("one lease is one holder; take a lease per concurrent holder"), r.reason.message);
    }
  }

  test("concurrent acquires of one name through one lease: one holds, the others are refused", async () => {
    // The finding: one lease per process and lease.lock() per request gave
    // concurrent requests the same grant, and the same token.
    const name = unique("invoices");
    const lease = await gate.lease();
    try {
      const results = await Promise.allSettled(Array.from({ length: 8 }, () => lease.lock(name, { wait: "5s" })));
      oneHolder(`lock ${JSON.stringify(name)}`, results);
      const grant = /** @type {PromiseFulfilledResult<zk.Grant>} */ (results.find((r) => r.status === "fulfilled")).value;
      const { state } = await gate.state("locks", name);
      assert.deepEqual(state.holders.map((h) => h.token), [grant.token]);
      await grant.release();
      const again = await lease.lock(name); // free again after the release
      assert.ok(again.token > grant.token);
      await again.release();

      const sem = unique("gpu");
      oneHolder(`semaphore ${JSON.stringify(sem)}`, await Promise.allSettled([1, 2, 3, 4].map(() => lease.semaphore(sem, 3, { wait: "5s" }))));
      await lease.release("semaphore", sem);
      await (await lease.semaphore(sem, 3)).release();

      const election = unique("scheduler");
      oneHolder(`election ${JSON.stringify(election)}`, await Promise.allSettled([1, 2, 3, 4].map(() => lease.campaign(election, { wait: "5s" }))));
      await lease.resign(election);
      await (await lease.campaign(election)).resign();
    } finally {
      await lease.revoke();
    }
  });

  test("a failed acquire frees the name", async () => {
    const name = unique("busy");
    const [holder, lease] = await Promise.all([gate.lease(), gate.lease()]);
    try {
      await holder.lock(name);
      for (let i = 0; i < 2; i++) await assert.rejects(lease.lock(name), zk.Timeout);
    } finally {
      await Promise.all([holder.revoke(), lease.revoke()]);
    }
  });
});
