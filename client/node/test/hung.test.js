// @ts-check
// A lease's deadline against a gateway that hangs: it accepts every
// connection and reads every request, then answers only the lease's creation
// and lock acquires, as a gateway frozen (SIGSTOP, a stalled machine) just
// after them (and a grant whose reading the event loop finishes only past
// the deadline). Needs no real gateway: the deadline must hold whatever the
// gateway does.
//
//   node --test client/node/test/hung.test.js

import assert from "node:assert/strict";
import net from "node:net";
import { afterEach, beforeEach, describe, test } from "node:test";

import * as zk from "../index.js";

// Bounds of the waits in these tests: generous, since they only end a test
// that fails, and shorter than a blocked call's own timeout (its wait of 30 s
// plus the client's 10 s), which is what they tell apart from the deadline.
const PATIENCE = 20_000;

const lease = "7a6b5c4d-1a2b-4c3d-8e9f-001122334455";

/**
 * The hung gateway: answers a lease's creation (a promise of 1.5 s, a TTL
 * of 2 s) and lock acquires, each on a connection it then closes; every
 * other request (keepalives, campaigns, claims, reads, revokes) is read and
 * never answered, its connection held open until the client lets it go.
 */
async function hungGateway() {
  /** @type {Set<net.Socket>} */
  const open = new Set();
  /** @type {string[]} */
  const hung = [];
  const server = net.createServer((sock) => {
    open.add(sock);
    sock.on("close", () => open.delete(sock));
    sock.on("error", () => {});
    let buf = "";
    sock.on("data", (chunk) => {
      buf += chunk.toString("latin1");
      const end = buf.indexOf("\r\n\r\n");
      if (end < 0) return;
      const [method, target] = buf.slice(0, buf.indexOf("\r\n")).split(" ");
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(buf.slice(0, end))?.[1] ?? 0);
      if (buf.length < end + 4 + length) return;
      const path = (target ?? "").split("?")[0];
      const now = Date.now();
      const stamp = (/** @type {number} */ t) => new Date(t).toISOString();
      /** @param {number} status @param {object} doc */
      const answer = (status, doc) => {
        const body = JSON.stringify(doc);
        sock.end(`HTTP/1.1 ${status} OK\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n`
          + `X-Zkgate-Time: ${stamp(now)}\r\nConnection: close\r\n\r\n${body}`);
      };
      if (method === "POST" && path === "/v1/leases") {
        answer(201, { id: lease, gateway: "g", ttl: "2s", holder: "h", lock_delay: "0s",
          expires_at: stamp(now + 1500), created_at: stamp(now), holds: [] });
      } else if (method === "POST" && path.startsWith("/v1/locks/") && path.endsWith("/acquire")) {
        answer(200, { name: path.split("/")[3], mode: "exclusive", lease, token: 7,
          node: "/zkgate/locks/x/_c_1-lock-0000000000", acquired_at: stamp(now) });
      } else {
        hung.push(`${method} ${path}`);
      }
      buf = "";
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(undefined)));
  const a = /** @type {net.AddressInfo} */ (server.address());
  return {
    url: `http://127.0.0.1:${a.port}`,
    open,
    hung,
    close: () => new Promise((resolve) => {
      for (const s of open) s.destroy();
      server.close(() => resolve(undefined));
    }),
  };
}

/**
 * @param {string} what
 * @param {() => boolean} cond
 */
async function eventually(what, cond, within = PATIENCE) {
  const deadline = Date.now() + within;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`not true within ${within} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * Resolves with how p settled, or rejects after ms.
 * @param {Promise<unknown>} p
 * @param {string} what
 * @returns {Promise<{ok: boolean, value: unknown}>}
 */
function settled(p, what, ms = PATIENCE) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${what} went on ${ms} ms while the gateway hung`)), ms);
    p.then((value) => resolve({ ok: true, value }), (value) => resolve({ ok: false, value })).finally(() => clearTimeout(t));
  });
}

describe("a gateway that hangs: the lease's deadline still ends what holds it", () => {
  /** @type {Awaited<ReturnType<typeof hungGateway>>} */
  let fake;
  beforeEach(async () => {
    fake = await hungGateway();
  });
  afterEach(async () => {
    await fake.close();
  });

  /**
   * The holder, started on the lease, ends with the lease's LeaseLost while
   * the gateway still hangs; then no connection of the client is left open.
   * @param {zk.Lease} l
   * @param {Promise<unknown>} holder
   * @param {string} blocked the request the holder blocks in
   */
  async function stoppedByTheLease(l, holder, blocked) {
    await eventually(`${blocked} is held by the gateway`, () => fake.hung.includes(blocked));
    const end = await settled(holder, "the holder");
    assert.equal(end.ok, false, "the holder's call succeeded against a gateway that never answered it");
    assert.ok(end.value instanceof zk.LeaseLost, `the holder ended with ${String(end.value)}`);
    assert.equal(end.value, l.error);
    assert.ok(l.signal.aborted);
    assert.match(String(l.error?.message), /confirmed before the deadline/);
    await assert.rejects(l.revoke(), zk.LeaseLost);
    // The calls and the background revoke (bounded by the TTL of 2 s) let go
    // of their connections, though the gateway answered none of them.
    await eventually("the client's connections are closed", () => fake.open.size === 0);
  }

  test("lead blocked in a campaign's round", async () => {
    const l = await new zk.Gateway({ url: fake.url }).lease({ ttl: "1m" });
    await stoppedByTheLease(l, l.lead("scheduler", { round: "30s" }), "POST /v1/elections/scheduler/campaign");
  });

  test("consume under a lock, blocked in a claim", async () => {
    const l = await new zk.Gateway({ url: fake.url }).lease({ ttl: "1m" });
    const grant = await l.lock("invoices");
    const holder = (async () => {
      try {
        for await (const item of l.consume("emails", { wait: "30s" })) await item.ack();
      } finally {
        await grant.release().catch(() => {});
      }
    })();
    await stoppedByTheLease(l, holder, "POST /v1/queues/emails/claim");
  });

  test("a grant read past the deadline, before the lease's timer ran, is its LeaseLost", async () => {
    // The grant's answer is read whole, then the event loop stalls across
    // the deadline (a long synchronous stretch) before the client goes on
    // with it: the lease's timer has not run, its signal has not aborted,
    // and the lock must still not be handed to the holder.
    /** @type {zk.Lease | undefined} */
    let l;
    /** @type {typeof fetch} */
    const stalling = async (input, init) => {
      const res = await fetch(input, init);
      const body = await res.arrayBuffer();
      if (l !== undefined && new URL(String(input)).pathname.endsWith("/acquire")) {
        const deadline = l.deadline;
        while (performance.now() < deadline) {
          // the stall: nothing else runs until the deadline has passed
        }
      }
      return new Response(body, { status: res.status, headers: res.headers });
    };
    l = await new zk.Gateway({ url: fake.url, fetch: stalling }).lease({ ttl: "1m" });
    let ran = false;
    const holder = (async () => {
      const grant = await /** @type {zk.Lease} */ (l).lock("invoices", { wait: "30s" });
      ran = true;
      await grant.release();
    })();
    const end = await settled(holder, "the holder");
    assert.equal(ran, false, "the lock was handed to the holder under a lease past its deadline");
    assert.ok(end.value instanceof zk.LeaseLost, `the holder ended with ${String(end.value)}`);
    assert.equal(end.value, l.error);
    assert.ok(l.signal.aborted);
    await assert.rejects(l.revoke(), zk.LeaseLost);
    await eventually("the client's connections are closed", () => fake.open.size === 0);
  });

  test("following the leadership with observe, blocked in a read", async () => {
    const gate = new zk.Gateway({ url: fake.url });
    const l = await gate.lease({ ttl: "1m" });
    const holder = (async () => {
      for await (const state of gate.observe("scheduler", { wait: "30s", signal: l.signal })) void state;
    })();
    await stoppedByTheLease(l, holder, "GET /v1/elections/scheduler");
  });
});
