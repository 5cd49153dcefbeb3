// A worker: takes a lease (kept alive on unref'd timers) and a lock, writes
// to a store that checks the lock's fencing token, and consumes a queue at
// least once.
//
//   cd examples/node && npm install          # links ../../client/node as "zkgate"
//   ZKGATE_URL=http://127.0.0.1:8080 node worker.mjs [LOCK [QUEUE]]
//
// It produces its own three items first, so that it runs on its own; it
// exits non-zero on any failure.

import { Gateway, ZkgateError } from "zkgate";

/**
 * A store that takes a write only with the token of a current holder of the
 * lock, and never with a token older than one it has seen. (A real store
 * keeps the highest token next to the data, in the same transaction.)
 */
class FencedStore {
  highest = 0;
  /** @type {string[]} */
  lines = [];

  /** @param {Gateway} gate @param {string} lock */
  constructor(gate, lock) {
    this.gate = gate;
    this.lock = lock;
  }

  /** @param {number} token @param {string} line */
  async write(token, line) {
    if (token < this.highest) throw new Error(`store: token ${token} is older than ${this.highest}`);
    if (!(await this.gate.fence(this.lock, token))) throw new Error(`store: token ${token} is stale`);
    this.highest = token;
    this.lines.push(line);
  }
}

async function main() {
  const [lock = "invoices", queue = "emails"] = process.argv.slice(2);
  const gate = new Gateway(); // $ZKGATE_URL, $ZKGATE_TOKEN
  const store = new FencedStore(gate, lock);

  for (let i = 1; i <= 3; i++) await gate.produce(queue, `email ${i}`); // the producer's side

  const lease = await gate.lease({ ttl: "15s", holder: "node-worker" });
  try {
    const grant = await lease.lock(lock, { wait: "10s" });
    try {
      console.log(`lock ${lock} held with fencing token ${grant.token}`);
      // Each item is acked when the body ends, nacked if it throws. The
      // lease's signal ends the loop at once if the lease is lost.
      for await (const item of lease.consume(queue, { wait: "1s", untilEmpty: true, signal: lease.signal })) {
        await store.write(grant.token, item.text);
      }
    } finally {
      await grant.release();
    }
    const late = await store.write(grant.token, "too late").then(() => true, () => false);
    if (late) throw new Error("the store took a write with a released token");
  } finally {
    await lease.revoke(); // or: await using lease = await gate.lease(...)
  }

  console.log(`consumed ${store.lines.length} items:\n${store.lines.join("\n")}`);
  if (store.lines.length < 3) throw new Error(`expected at least 3 items, consumed ${store.lines.length}`);
}

main().catch((e) => {
  console.error(`worker: ${e instanceof ZkgateError ? `${e.name}: ` : ""}${e instanceof Error ? e.message : e}`);
  process.exitCode = 1;
});
