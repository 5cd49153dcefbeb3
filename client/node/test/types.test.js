// @ts-check
// index.d.ts compiles under `tsc --strict` with TypeScript's default libs and
// nothing else (no esnext.disposable, no @types/node), and `await using`
// disposes of a lease where the lib knows Symbol.asyncDispose. tsc is the
// one pinned in tools/package-lock.json (scripts/test-clients.sh installs it).

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const client = path.resolve(here, "..", "index.js");
const tools = path.resolve(here, "..", "..", "..", "tools");
const tsc = path.join(tools, "node_modules", "typescript", "bin", "tsc");

/** What a user writes, without `await using`. */
const plain = (/** @type {string} */ from) => `
import { Gateway, Unreachable, gatewayURLOf, type Campaign, type ElectionState } from ${JSON.stringify(from)};
const gate = new Gateway({ url: gatewayURLOf(), connectRetries: 1 });
const lease = await gate.lease({ ttl: "15s" });
try {
  const grant = await lease.lock("invoices", { wait: "10s" });
  const token: number = grant.token;
  await grant.release();
  const led: Campaign = await lease.lead("scheduler", { value: String(token), round: "5s", wait: "1m" });
  await led.resign();
  for await (const st of gate.observe("scheduler")) {
    const s: ElectionState = st;
    if (s.leader === null) break;
  }
} catch (e) {
  if (!(e instanceof Unreachable)) throw e;
} finally {
  await lease.revoke();
}
`;

/** The same with `await using`, where the lib has it. */
const disposing = (/** @type {string} */ from) => `
import { Gateway } from ${JSON.stringify(from)};
const gate = new Gateway();
{
  await using lease = await gate.lease();
  await using grant = await lease.lock("invoices");
  await using led = await lease.campaign("scheduler");
  const d: AsyncDisposable = grant;
  void d, led;
}
`;

/**
 * Runs tsc on one file with these compiler options; resolves to its output.
 * @param {(from: string) => string} source
 * @param {Record<string, unknown>} options
 */
function compile(source, options) {
  const dir = mkdtempSync(path.join(tmpdir(), "zkgate-types-"));
  try {
    const from = path.relative(dir, client).split(path.sep).join("/");
    writeFileSync(path.join(dir, "check.mts"), source(from.startsWith(".") ? from : `./${from}`));
    writeFileSync(path.join(dir, "tsconfig.json"), JSON.stringify({
      compilerOptions: { strict: true, noEmit: true, skipLibCheck: false, module: "nodenext", target: "es2022", types: [], ...options },
      files: ["check.mts"],
    }));
    return new Promise(/** @param {(r: {ok: boolean, out: string}) => void} resolve */ (resolve) => {
      execFile(process.execPath, [tsc, "-p", dir], (err, stdout, stderr) => {
        rmSync(dir, { recursive: true, force: true });
        resolve({ ok: !err, out: `${stdout}${stderr}` });
      });
    });
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
}

test("tsc is installed (scripts/test-clients.sh runs npm ci in tools/)", () => {
  assert.ok(existsSync(tsc), `${tsc} is missing: run npm ci in ${tools}`);
});

/** @type {[string, (from: string) => string, Record<string, unknown>][]} */
const cases = [
  ["the default libs, no @types/node", plain, {}],
  ["es2022 and esnext.disposable: await using", disposing, { lib: ["es2022", "esnext.disposable", "dom"] }],
  ["es2022 and @types/node, no DOM", plain, { lib: ["es2022"], types: ["node"], typeRoots: [path.join(tools, "node_modules", "@types")] }],
];
for (const [name, source, options] of cases) {
  test(`index.d.ts compiles with tsc --strict: ${name}`, async () => {
    const { ok, out } = await compile(source, options);
    assert.ok(ok, out);
  });
}
