// @ts-check
// How the client finds and reaches its gateway: ZKGATE_URL and ZKGATE_TOKEN
// (read as the Go and Python clients read them), and a gateway nobody
// listens for. Run by scripts/test-clients.sh, which starts a gateway and
// sets ZKGATE_URL.

import assert from "node:assert/strict";
import http from "node:http";
import net from "node:net";
import { after, afterEach, before, describe, test } from "node:test";

import * as zk from "../index.js";

const URL = process.env.ZKGATE_URL;
if (!URL) throw new Error("ZKGATE_URL is not set: run scripts/test-clients.sh, which starts a gateway for these tests");

/** An HTTP proxy in front of the gateway that records the Authorization of each request. */
function recordingProxy() {
  const upstream = new globalThis.URL(/** @type {string} */ (URL));
  /** @type {(string | undefined)[]} */
  const auth = [];
  /** @type {[string | undefined, string | undefined][]} the traceparent and tracestate of each request */
  const trace = [];
  const server = http.createServer((req, res) => {
    auth.push(req.headers.authorization);
    trace.push([/** @type {string | undefined} */ (req.headers.traceparent), /** @type {string | undefined} */ (req.headers.tracestate)]);
    const up = http.request(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    up.on("error", () => res.destroy());
    req.pipe(up);
  });
  return { server, auth, trace };
}

/** A loopback host:port nobody listens on: a port taken, then let go. */
async function deadAddress() {
  const s = net.createServer();
  await new Promise((resolve) => s.listen(0, "127.0.0.1", () => resolve(undefined)));
  const { port } = /** @type {net.AddressInfo} */ (s.address());
  await new Promise((resolve) => s.close(() => resolve(undefined)));
  return `127.0.0.1:${port}`;
}

describe("the environment", () => {
  const { server, auth } = recordingProxy();
  let hostPort = "";
  const saved = { url: process.env.ZKGATE_URL, token: process.env.ZKGATE_TOKEN };
  before(async () => {
    await new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(undefined)));
    hostPort = `127.0.0.1:${/** @type {net.AddressInfo} */ (server.address()).port}`;
  });
  after(() => new Promise((resolve) => server.close(() => resolve(undefined))));
  afterEach(() => {
    for (const [k, v] of [["ZKGATE_URL", saved.url], ["ZKGATE_TOKEN", saved.token]]) {
      if (v === undefined) delete process.env[/** @type {string} */ (k)];
      else process.env[/** @type {string} */ (k)] = v;
    }
  });

  test("defaults", () => {
    process.env.ZKGATE_URL = "";
    process.env.ZKGATE_TOKEN = "";
    const gate = new zk.Gateway();
    assert.equal(gate.url, "http://127.0.0.1:8080");
    assert.equal(zk.DEFAULT_URL, "http://127.0.0.1:8080");
    assert.equal(gate.token, undefined);
  });

  test("the URL and the token from the environment", async () => {
    process.env.ZKGATE_URL = ` ${hostPort} `;
    process.env.ZKGATE_TOKEN = "from-env";
    const gate = new zk.Gateway();
    assert.equal(gate.url, `http://${hostPort}`);
    await gate.list("locks");
    assert.equal(auth.at(-1), "Bearer from-env");
  });

  test("what the caller gives wins", async () => {
    process.env.ZKGATE_URL = "http://127.0.0.1:9";
    process.env.ZKGATE_TOKEN = "from-env";
    const gate = new zk.Gateway({ url: hostPort, token: "given" });
    assert.equal(gate.url, `http://${hostPort}`);
    await gate.list("locks");
    assert.equal(auth.at(-1), "Bearer given");
    await new zk.Gateway({ url: `http://${hostPort}`, token: "" }).list("locks");
    assert.equal(auth.at(-1), undefined);
  });

  test("URLs", () => {
    process.env.ZKGATE_URL = "";
    for (const [given, want] of [["localhost:8080", "http://localhost:8080"], ["[::1]:80", "http://[::1]:80"],
      ["https://h:1/base/", "https://h:1/base"], ["h:1/base", "http://h:1/base"]]) {
      assert.equal(new zk.Gateway({ url: given }).url, want, given);
    }
    for (const bad of ["ftp://h:1", "http://", "http://h:1/?q=1", "http://u@h:1", "http://h:1/#f"]) {
      assert.throws(() => new zk.Gateway({ url: bad }), zk.InvalidRequest, bad);
      process.env.ZKGATE_URL = bad;
      assert.throws(() => new zk.Gateway(), zk.InvalidRequest, bad);
      process.env.ZKGATE_URL = "";
    }
  });
});

describe("traceHeaders", () => {
  const { server, auth, trace } = recordingProxy();
  let hostPort = "";
  before(async () => {
    await new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(undefined)));
    hostPort = `127.0.0.1:${/** @type {net.AddressInfo} */ (server.address()).port}`;
  });
  after(() => new Promise((resolve) => server.close(() => resolve(undefined))));

  test("every request carries the trace context the hook gives at the call; a malformed one, or none, sends nothing", async () => {
    /** @type {Record<string, string>} */
    let current = {};
    const gate = new zk.Gateway({ url: hostPort, token: "", traceHeaders: () => current });
    const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    current = { traceparent: tp, tracestate: "vendor=1", authorization: "Bearer not-this" };
    const lease = await gate.lease({ ttl: "30s", holder: "traced" });
    try {
      assert.deepEqual(trace.at(-1), [tp, "vendor=1"], "the lease's grant");
      const grant = await lease.lock("traced-node", { wait: "1s" });
      assert.deepEqual(trace.at(-1), [tp, "vendor=1"], "the acquire");
      await grant.release();
      assert.ok(auth.every((a) => a === undefined), `${auth}`);
      current = {};
      await gate.list("locks");
      assert.deepEqual(trace.at(-1), [undefined, undefined], "no trace context");
      current = { traceparent: "00-not-one", tracestate: "vendor=1" };
      await gate.list("locks");
      assert.deepEqual(trace.at(-1), [undefined, undefined], "a malformed traceparent");
    } finally {
      current = {};
      await lease.revoke();
    }
  });
});

describe("a gateway nobody listens for", () => {
  /** A client of address whose fetch counts its calls (each a connection attempt: nothing is pooled). */
  function counting(/** @type {string} */ address, /** @type {zk.GatewayOptions} */ options = {}) {
    const calls = { n: 0 };
    /** @type {typeof fetch} */
    const fetchCounted = (input, init) => {
      calls.n++;
      return globalThis.fetch(input, init);
    };
    return { gate: new zk.Gateway({ url: address, fetch: fetchCounted, ...options }), calls };
  }

  test("Unreachable, naming the URL, after 1 + connectRetries attempts, whatever the call", async () => {
    const address = await deadAddress();
    const { gate, calls } = counting(address);
    /** @type {Record<string, () => Promise<unknown>>} */
    const ops = {
      lease: () => gate.lease(),
      state: () => gate.state("locks", "x"),
      produce: () => gate.produce("q", "x"),
      waitBarrier: () => gate.waitBarrier("b", { wait: "1m" }),
    };
    for (const [name, op] of Object.entries(ops)) {
      calls.n = 0;
      await assert.rejects(op(), (e) => {
        assert.ok(e instanceof zk.Unreachable && e instanceof zk.TransportError, `${name}: ${e}`);
        assert.match(e.message, new RegExp(`http://${address}`));
        assert.ok(e.cause instanceof zk.TransportError, `${name}: cause ${e.cause}`);
        return true;
      });
      assert.equal(calls.n, 1 + zk.DEFAULT_CONNECT_RETRIES, name);
    }
    assert.equal(zk.DEFAULT_CONNECT_RETRIES, 3);
    for (const options of [{ connectRetries: 0 }, { retryFor: 0 }]) {
      const once = counting(address, options);
      await assert.rejects(once.gate.state("locks", "x"), zk.Unreachable);
      assert.equal(once.calls.n, 1, JSON.stringify(options));
    }
    assert.equal(await gate.ready(), false);
  });
});

/** A TCP front at a loopback port that passes connections on to the gateway; stopped, it refuses them, as a gateway's address does while it restarts. */
async function tcpFront() {
  const upstream = new globalThis.URL(/** @type {string} */ (URL));
  /** @type {Set<net.Socket>} */
  const sockets = new Set();
  /** @type {net.Server | undefined} */
  let server;
  let port = 0;
  const start = () =>
    new Promise((resolve) => {
      server = net.createServer((inbound) => {
        const outbound = net.connect(Number(upstream.port), upstream.hostname);
        for (const s of [inbound, outbound]) {
          sockets.add(s);
          s.on("error", () => {});
          s.on("close", () => sockets.delete(s));
        }
        inbound.pipe(outbound).pipe(inbound);
      });
      server.listen(port, "127.0.0.1", () => {
        port = /** @type {net.AddressInfo} */ (server?.address()).port;
        resolve(undefined);
      });
    });
  const stop = () => {
    server?.close();
    for (const s of sockets) s.destroy();
  };
  await start();
  return { url: () => `http://127.0.0.1:${port}`, start, stop };
}

describe("a restart of the gateway", () => {
  // While a lease is known to live, a call made for it rides through a
  // gateway that refuses connections for a while: a lock asked for while
  // nothing listens is granted once the address listens again, 1.5 s
  // later. A call for no lease still fails at once (the unreachable tests).
  test("a lease's calls ride through it", async () => {
    const front = await tcpFront();
    try {
      const gate = new zk.Gateway({ url: front.url() });
      const lease = await gate.lease({ ttl: "30s", holder: "node-restart" });
      try {
        front.stop();
        const back = setTimeout(() => void front.start(), 1500); // the gateway's restart takes that long
        try {
          const grant = await lease.lock("node-ride", { wait: "10s" });
          assert.equal(lease.error, undefined);
          await grant.release();
        } finally {
          clearTimeout(back);
        }
      } finally {
        await lease.revoke();
      }
    } finally {
      front.stop();
    }
  });
});
