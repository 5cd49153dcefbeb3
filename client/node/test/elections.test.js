// @ts-check
// Leadership: lead until elected, and observe changes of leader only. Run
// by scripts/test-clients.sh, which starts a gateway and sets ZKGATE_URL.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { describe, test } from "node:test";

import * as zk from "../index.js";

const URL = process.env.ZKGATE_URL;
if (!URL) throw new Error("ZKGATE_URL is not set: run scripts/test-clients.sh, which starts a gateway for these tests");
const gate = new zk.Gateway({ url: URL });
const unique = (/** @type {string} */ prefix) => `${prefix}-${randomUUID().slice(0, 10)}`;

/** The lease ids of an election's candidates, the leader first. @param {string} name */
async function candidates(name) {
  return (await gate.state("elections", name)).state.candidates.map((c) => c.lease);
}

describe("elections", () => {
  test("observe skips the line behind the leader", async () => {
    const name = unique("observed");
    const [a, b, c] = await Promise.all([gate.lease(), gate.lease(), gate.lease()]);
    try {
      const leaders = gate.observe(name, { wait: "5s" });
      const next = async () => /** @type {zk.ElectionState} */ ((await leaders.next()).value);
      assert.equal((await next()).leader, null);
      const first = await a.campaign(name, { value: "a1" });
      assert.ok(first.elected);
      assert.equal((await next()).leader?.value, "a1");
      assert.ok(!(await b.campaign(name, { value: "b" })).elected);
      assert.ok(!(await c.campaign(name, { value: "c" })).elected);
      await c.resign(name);
      await first.proclaim("a2");
      const st = await next();
      assert.deepEqual([st.leader?.lease, st.leader?.value], [a.id, "a2"]);
      assert.deepEqual(st.candidates.map((x) => x.lease), [a.id, b.id]);
      await first.resign();
      assert.equal((await next()).leader?.lease, b.id);
      await leaders.return(undefined);
    } finally {
      await Promise.all([a.revoke(), b.revoke(), c.revoke()]);
    }
  });

  test("lead until elected; a wait that passes first resigns", async () => {
    const name = unique("led");
    const [a, b] = await Promise.all([gate.lease(), gate.lease()]);
    try {
      const led = await a.lead(name, { value: "a", round: "1s" });
      assert.ok(led.elected && led.token !== undefined);
      await assert.rejects(b.lead(name, { value: "b", round: "200ms", wait: "500ms" }), zk.Timeout);
      assert.deepEqual(await candidates(name), [a.id]);
      const ctl = new AbortController();
      const given = b.lead(name, { value: "b", round: "200ms", signal: ctl.signal });
      for (const deadline = Date.now() + 20_000; (await candidates(name)).length < 2;) {
        assert.ok(Date.now() < deadline, "b is not in line");
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      ctl.abort(new Error("given up"));
      await assert.rejects(given, /given up/);
      assert.deepEqual(await candidates(name), [a.id]);
      const waiting = b.lead(name, { value: "b", round: "200ms" });
      await led.resign();
      const won = await waiting;
      assert.ok(won.elected && /** @type {number} */ (won.token) > /** @type {number} */ (led.token));
      await assert.rejects(b.lead(name, { round: "0s" }), zk.InvalidRequest);
    } finally {
      await Promise.all([a.revoke(), b.revoke()]);
    }
  });
});
