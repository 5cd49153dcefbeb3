// @ts-check
// A client of zkgate, ZooKeeper's coordination recipes over HTTP: leases kept
// alive for you, locks with fencing tokens, semaphores, elections, barriers
// and queues. No dependencies: Node 18+ and its built-in fetch.
// The public types are in index.d.ts; the JSON on the wire is typed there too
// and checked against openapi.yaml (scripts/test-clients.sh).

/** @typedef {import("./index.js").Duration} Duration */
/** @typedef {import("./index.js").Kind} Kind */
/** @typedef {import("./index.js").CounterFormat} CounterFormat */
/** @typedef {import("./index.js").CounterState} CounterState */
/** @typedef {import("./index.js").ListOf} ListOf */
/** @typedef {import("./index.js").LockMode} LockMode */
/** @typedef {import("./index.js").LeaseInfo} LeaseInfo */
/** @typedef {import("./index.js").LockGrantInfo} LockGrantInfo */
/** @typedef {import("./index.js").SemaphoreGrantInfo} SemaphoreGrantInfo */
/** @typedef {import("./index.js").CampaignInfo} CampaignInfo */
/** @typedef {import("./index.js").Holder} Holder */
/** @typedef {import("./index.js").Member} Member */
/** @typedef {import("./index.js").DoubleBarrierInfo} DoubleBarrierInfo */
/** @typedef {import("./index.js").DoubleBarrierState} DoubleBarrierState */
/** @typedef {import("./index.js").ItemInfo} ItemInfo */
/** @typedef {import("./index.js").GroupMember} GroupMember */
/** @typedef {import("./index.js").GroupInfo} GroupInfo */
/** @typedef {import("./index.js").Problem} Problem */
/** @typedef {import("./index.js").GatewayOptions} GatewayOptions */
/** @typedef {import("./index.js").LeaseOptions} LeaseOptions */
/** @typedef {import("./index.js").WaitOptions} WaitOptions */
/** @typedef {import("./index.js").CallOptions} CallOptions */
/** @typedef {import("./index.js").wire.LeaseRequest} LeaseRequest */
/** @typedef {import("./index.js").wire.LockAcquireRequest} LockAcquireRequest */
/** @typedef {import("./index.js").wire.LockReleaseRequest} LockReleaseRequest */
/** @typedef {import("./index.js").wire.LockRequest} LockRequest */
/** @typedef {import("./index.js").wire.LockSetAcquireRequest} LockSetAcquireRequest */
/** @typedef {import("./index.js").wire.LockSetReleaseRequest} LockSetReleaseRequest */
/** @typedef {import("./index.js").wire.SemaphoreAcquireRequest} SemaphoreAcquireRequest */
/** @typedef {import("./index.js").wire.LeaseOnlyRequest} LeaseOnlyRequest */
/** @typedef {import("./index.js").wire.CampaignRequest} CampaignRequest */
/** @typedef {import("./index.js").wire.ProclaimRequest} ProclaimRequest */
/** @typedef {import("./index.js").wire.EnterRequest} EnterRequest */
/** @typedef {import("./index.js").wire.LeaveRequest} LeaveRequest */
/** @typedef {import("./index.js").wire.JoinRequest} JoinRequest */
/** @typedef {import("./index.js").wire.GroupLeaveRequest} GroupLeaveRequest */
/** @typedef {{status: number, headers: Headers, body: Uint8Array, sent: number}} Reply  sent: performance.now() when its request was sent */

export const VERSION = "0.1.0";
export const DEFAULT_URL = "http://127.0.0.1:8080";
export const DEFAULT_CONNECT_RETRIES = 3;
// The longest pause a Retry-After is followed for, in ms.
const maxRetryAfter = 5000;
/** @type {readonly Kind[]} */
/** The most locks one set (Lease.lockAll) may name. */
export const MAX_LOCK_SET = 32;
export const KINDS = Object.freeze(["locks", "semaphores", "elections", "barriers", "double-barriers", "queues", "groups",
  "counters"]);
/** How a counter's znode holds its value (see Gateway.counter). */
export const COUNTER_FORMATS = Object.freeze(["decimal", "int32", "int64"]);

// TypeScript's `await using` looks for Symbol.asyncDispose, or this stand-in on runtimes without it.
const asyncDispose = /** @type {typeof Symbol.asyncDispose} */ (Symbol.asyncDispose ?? Symbol.for("Symbol.asyncDispose"));

// ---------------------------------------------------------------------------
// Errors: one class per problem code.

export class ZkgateError extends Error {
  /** @type {string | undefined} */
  static code = undefined;

  /**
   * @param {string} detail
   * @param {{status?: number, code?: string, problem?: Problem | Record<string, unknown>, retryAfter?: number, cause?: unknown}} [info]
   */
  constructor(detail, info = {}) {
    const where = [info.status, info.code ?? /** @type {typeof ZkgateError} */ (new.target).code].filter((x) => x !== undefined);
    super(where.length ? `${where.join(" ")}: ${detail}` : detail, info.cause === undefined ? undefined : { cause: info.cause });
    this.name = new.target.name;
    this.detail = detail;
    /** @type {number | undefined} */
    this.status = info.status;
    /** @type {string | undefined} */
    this.code = info.code ?? /** @type {typeof ZkgateError} */ (new.target).code;
    /** @type {Record<string, unknown>} */
    this.problem = { ...(info.problem ?? {}) };
    /** @type {number | undefined} seconds */
    this.retryAfter = info.retryAfter;
  }
}
export class TransportError extends ZkgateError {}
/** No connection to the gateway: the request was not sent. */
class NotConnected extends TransportError {}
/**
 * No connection to the gateway could be made (refused, no route, unknown
 * host) in 1 + connectRetries attempts: nothing was sent. The message names
 * the gateway's URL and the last failure (also its `cause`).
 */
export class Unreachable extends TransportError {}
// The codes of a failure to connect (Node's fetch puts them on its error's cause).
const connectFailures = new Set(["ECONNREFUSED", "EHOSTUNREACH", "ENETUNREACH", "ENOTFOUND", "EAI_AGAIN", "UND_ERR_CONNECT_TIMEOUT"]);

// The bound of a connection to a gateway other than this one's URL (a lease's
// keeper, named by X-Zkgate-Lease-Moved-To): its address may be out of reach
// (a gateway's own address, behind a load balancer), where a connection
// attempt can go unanswered for longer than the lease's deadline.
const movedConnectTimeout = 2000;

/**
 * Whether a TCP connection to the gateway at url comes within ms; true
 * where node:net is not there to tell (the request itself then does).
 * @param {string} url
 * @param {number} ms
 * @returns {Promise<boolean>}
 */
async function connects(url, ms) {
  let net;
  try {
    net = await import("node:net");
  } catch {
    return true;
  }
  const u = new URL(url);
  const host = u.hostname.replace(/^\[(.*)\]$/, "$1");
  const port = Number(u.port || (u.protocol === "https:" ? 443 : 80));
  return new Promise((resolve) => {
    const s = net.connect({ host, port });
    const done = (/** @type {boolean} */ ok) => {
      clearTimeout(t);
      s.destroy();
      resolve(ok);
    };
    const t = setTimeout(() => done(false), ms);
    s.once("connect", () => done(true));
    s.once("error", () => done(false));
  });
}

/**
 * A gateway's base URL, as X-Zkgate-Lease-Moved-To names one: undefined for
 * anything but an http or https URL with a host and nothing more.
 * @param {string | null} v
 * @returns {string | undefined}
 */
function gatewayURL(v) {
  if (!v) return undefined;
  let u;
  try {
    u = new URL(v);
  } catch {
    return undefined;
  }
  if ((u.protocol !== "http:" && u.protocol !== "https:") || !u.host || u.search || u.hash || u.username) return undefined;
  return v.replace(/\/+$/, "");
}
export class InvalidRequest extends ZkgateError { static code = "invalid_request"; }
/**
 * The lease already holds, or is acquiring, that lock, semaphore or election:
 * one lease is one holder (the gateway would answer a second call with the
 * first one's grant). Take a lease per concurrent holder. No request was sent.
 */
export class AlreadyHeld extends InvalidRequest {}
export class LeaseLost extends ZkgateError {}
export class LeaseExpired extends LeaseLost {
  static code = "lease_expired";
  /** @returns {string | undefined} */
  get reason() {
    const r = this.problem.reason;
    return typeof r === "string" ? r : undefined;
  }
}
export class LeaseNotFound extends LeaseLost { static code = "lease_not_found"; }
export class NotFound extends ZkgateError { static code = "not_found"; }
export class Timeout extends ZkgateError { static code = "timeout"; }
export class NotHeld extends ZkgateError { static code = "not_held"; }
export class NotLeader extends ZkgateError { static code = "not_leader"; }
export class NotClaimed extends ZkgateError { static code = "not_claimed"; }
export class LimitMismatch extends ZkgateError { static code = "limit_mismatch"; }
export class CountMismatch extends ZkgateError { static code = "count_mismatch"; }
export class StaleToken extends ZkgateError { static code = "stale_token"; }
export class WouldDeadlock extends ZkgateError { static code = "would_deadlock"; }
export class Deadlock extends ZkgateError { static code = "deadlock"; }
export class NotEmpty extends ZkgateError { static code = "not_empty"; }
export class Unauthenticated extends ZkgateError { static code = "unauthenticated"; }
export class Forbidden extends ZkgateError { static code = "forbidden"; }
export class MethodNotAllowed extends ZkgateError { static code = "method_not_allowed"; }
export class TooLarge extends ZkgateError { static code = "too_large"; }
export class UnsupportedMediaType extends ZkgateError { static code = "unsupported_media_type"; }
export class TooMany extends ZkgateError { static code = "too_many"; }
export class QueueFull extends ZkgateError { static code = "queue_full"; }
export class Unavailable extends ZkgateError { static code = "unavailable"; }
export class InternalError extends ZkgateError { static code = "internal"; }
// The counters'.
export class VersionMismatch extends ZkgateError { static code = "version_mismatch"; }
export class FormatMismatch extends ZkgateError { static code = "format_mismatch"; }
export class OutOfRange extends ZkgateError { static code = "out_of_range"; }

/** @type {Map<string, typeof ZkgateError>} */
const byCode = new Map(
  [InvalidRequest, LeaseExpired, LeaseNotFound, NotFound, Timeout, NotHeld, NotLeader, NotClaimed, LimitMismatch,
    CountMismatch, StaleToken, WouldDeadlock, Deadlock, NotEmpty, Unauthenticated, Forbidden, MethodNotAllowed, TooLarge,
    UnsupportedMediaType, TooMany, QueueFull, Unavailable, InternalError,
    VersionMismatch, FormatMismatch, OutOfRange].map((c) => [/** @type {string} */ (c.code), c]),
);
// Answers that are not problem documents (a proxy's, say) are classed by status.
/** @type {Record<number, typeof ZkgateError>} */
const byStatus = {
  400: InvalidRequest, 401: Unauthenticated, 403: Forbidden, 404: NotFound, 405: MethodNotAllowed, 413: TooLarge,
  415: UnsupportedMediaType, 429: TooMany, 500: InternalError, 502: Unavailable, 503: Unavailable, 504: Unavailable,
  507: QueueFull,
};

/**
 * The typed error of an answer with an error status.
 * @param {number} status
 * @param {string} contentType
 * @param {Uint8Array} body
 * @param {string | null} retryAfter
 * @returns {ZkgateError}
 */
export function errorFrom(status, contentType, body, retryAfter) {
  const text = new TextDecoder().decode(body);
  /** @type {Record<string, unknown>} */
  let problem = {};
  if (contentType.includes("json")) {
    try {
      const doc = JSON.parse(text);
      if (doc && typeof doc === "object" && !Array.isArray(doc)) problem = doc;
    } catch {
      problem = {};
    }
  }
  const code = typeof problem.code === "string" ? problem.code : undefined;
  let detail = typeof problem.detail === "string" && problem.detail ? problem.detail : text.trim().slice(0, 200);
  if (!detail) detail = `HTTP ${status}`;
  const after = retryAfter && /^\s*\d+\s*$/.test(retryAfter) ? Number(retryAfter) : undefined;
  const Cls = (code && byCode.get(code)) || byStatus[status] || ZkgateError;
  return new Cls(detail, { status, code: code ?? Cls.code, problem, retryAfter: after });
}

// ---------------------------------------------------------------------------
// Durations, names, signals.

const units = /** @type {Record<string, number>} */ ({ ns: 1e-6, us: 1e-3, "µs": 1e-3, "μs": 1e-3, ms: 1, s: 1e3, m: 60e3, h: 3600e3 });

/**
 * Milliseconds of a duration: a Go duration string ("500ms", "15s", "2m") or a number of milliseconds.
 * @param {Duration} d
 * @returns {number}
 */
export function parseDuration(d) {
  if (typeof d === "number") {
    if (!Number.isFinite(d) || d < 0) throw new InvalidRequest(`bad duration ${d}: want a number of milliseconds >= 0`);
    return d;
  }
  if (typeof d !== "string") throw new InvalidRequest(`bad duration ${String(d)}`);
  const s = d.trim();
  if (s === "0") return 0;
  const part = /([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)/y;
  let ms = 0;
  let pos = 0;
  while (pos < s.length) {
    part.lastIndex = pos;
    const m = part.exec(s);
    if (!m || m[1] === "" || m[1] === ".") break;
    ms += Number(m[1]) * units[m[2]];
    pos = part.lastIndex;
  }
  if (pos === 0 || pos !== s.length) {
    throw new InvalidRequest(`bad duration ${JSON.stringify(d)}: want a Go duration such as "500ms", "15s" or "2m"`);
  }
  return ms;
}

/**
 * A Go duration string for milliseconds.
 * @param {number} ms
 */
export function formatDuration(ms) {
  const r = Math.round(ms);
  return r % 1000 === 0 ? `${r / 1000}s` : `${r}ms`;
}

/** @param {Duration} d @returns {[string, number]} the duration as sent (a string as given, once checked) and in ms */
function wireDuration(d) {
  const ms = parseDuration(d);
  return [typeof d === "string" ? d.trim() : formatDuration(ms), ms];
}

/**
 * ?format= of a counter's call ({} for the gateway's default, decimal).
 * @param {string | undefined} format
 * @returns {Record<string, string>}
 */
function formatQuery(format) {
  if (format === undefined) return {};
  if (!COUNTER_FORMATS.includes(format)) {
    throw new InvalidRequest(`bad counter format ${JSON.stringify(format)}: one of ${COUNTER_FORMATS.join(", ")}`);
  }
  return { format };
}

/**
 * The name, path-escaped, once it is one the gateway accepts.
 * @param {string} n
 */
function pathName(n) {
  if (typeof n !== "string" || !/^[A-Za-z0-9._-]{1,200}$/.test(n) || n === "." || n === "..") {
    throw new InvalidRequest(`bad name ${JSON.stringify(n)}: 1 to 200 characters of [A-Za-z0-9._-], not . or ..`);
  }
  return encodeURIComponent(n);
}

/** @param {string} id */
function pathId(id) {
  if (typeof id !== "string" || !/^[A-Za-z0-9._-]{1,200}$/.test(id) || id === "." || id === "..") {
    throw new InvalidRequest(`bad id ${JSON.stringify(id)}`);
  }
  return encodeURIComponent(id);
}

/**
 * One signal that aborts when any of `signals` does (with its reason), or
 * after `timeoutMs` (with a TransportError). `done()` unhooks it all.
 * @param {(AbortSignal | undefined)[]} signals
 * @param {number} [timeoutMs]
 */
function linked(signals, timeoutMs) {
  const ctl = new AbortController();
  /** @type {(() => void)[]} */
  const undo = [];
  for (const s of signals) {
    if (!s) continue;
    if (s.aborted) {
      ctl.abort(s.reason);
      break;
    }
    const on = () => ctl.abort(s.reason);
    s.addEventListener("abort", on, { once: true });
    undo.push(() => s.removeEventListener("abort", on));
  }
  /** @type {NodeJS.Timeout | undefined} */
  let timer;
  if (timeoutMs !== undefined && !ctl.signal.aborted) {
    timer = setTimeout(() => ctl.abort(new TransportError(`no answer within ${formatDuration(timeoutMs)}`)), timeoutMs);
    timer.unref?.();
  }
  return {
    signal: ctl.signal,
    done() {
      clearTimeout(timer);
      for (const f of undo) f();
    },
  };
}

/**
 * Resolves after ms, or rejects with the reason of the first signal that
 * aborts. The pause of a call someone awaits keeps the process alive (else
 * Node would exit mid-retry, the call never settled); work in the
 * background passes `background` so that it does not.
 * @param {number} ms
 * @param {(AbortSignal | undefined)[]} signals
 * @param {boolean} [background]
 * @returns {Promise<void>}
 */
function sleep(ms, signals, background = false) {
  const l = linked(signals);
  return new Promise((resolve, reject) => {
    if (l.signal.aborted) {
      l.done();
      reject(l.signal.reason);
      return;
    }
    const timer = setTimeout(() => {
      l.signal.removeEventListener("abort", onAbort);
      l.done();
      resolve();
    }, ms);
    if (background) timer.unref?.();
    function onAbort() {
      clearTimeout(timer);
      l.done();
      reject(l.signal.reason);
    }
    l.signal.addEventListener("abort", onAbort, { once: true });
  });
}

/** @param {Reply} r @returns {any} */
function json(r) {
  try {
    return JSON.parse(new TextDecoder().decode(r.body));
  } catch (e) {
    throw new TransportError(`the gateway answered ${r.status} with a body that is not JSON`, { cause: e });
  }
}

const transient = /** @param {unknown} e */ (e) => e instanceof TransportError || e instanceof Unavailable || e instanceof TooMany;

/**
 * The pause before retry attempt+1, in ms: 100 ms doubling to 2 s, with
 * jitter (half to all of it) so that many clients do not retry in step.
 * @param {number} attempt
 */
function backoff(attempt) {
  const d = Math.min(100 * 2 ** Math.min(attempt, 5), 2000);
  return d / 2 + Math.random() * (d / 2);
}

/**
 * The gateway URL a client uses: `url`, else $ZKGATE_URL, else DEFAULT_URL
 * (empty counts as unset); host:port means http://host:port. The Go and
 * Python clients read it the same way.
 * @param {string} [url]
 * @returns {string}
 */
export function gatewayURLOf(url) {
  const env = typeof process !== "undefined" ? process.env : {};
  const u = (url ?? "").trim() || (env.ZKGATE_URL ?? "").trim() || DEFAULT_URL;
  return u.includes("://") ? u : `http://${u}`;
}

// A W3C traceparent: version, trace id, parent id, flags (a later version may add more after a dash).
const TRACEPARENT = /^(?!ff)[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-[\x21-\x7e]*)?$/;
const TRACESTATE = /^[\x20-\x7e]{0,512}$/;

/**
 * The W3C trace headers of `given` (a traceHeaders hook's answer) that may
 * be sent: a sane traceparent, and its tracestate; no other key.
 * @param {Record<string, string> | undefined} given
 * @returns {Record<string, string>}
 */
export function traceContext(given) {
  /** @type {Record<string, string>} */
  const got = {};
  for (const [k, v] of Object.entries(given ?? {})) if (typeof v === "string") got[k.toLowerCase()] = v;
  if (!TRACEPARENT.test(got.traceparent ?? "")) return {};
  /** @type {Record<string, string>} */
  const out = { traceparent: got.traceparent };
  if (got.tracestate && TRACESTATE.test(got.tracestate)) out.tracestate = got.tracestate;
  return out;
}

// ---------------------------------------------------------------------------
// The gateway.

export class Gateway {
  /** @param {GatewayOptions} [options] */
  constructor(options = {}) {
    const env = typeof process !== "undefined" ? process.env : {};
    const url = gatewayURLOf(options.url);
    if (gatewayURL(url) === undefined) {
      throw new InvalidRequest(`bad gateway URL ${JSON.stringify(url)}: want http://host:port`);
    }
    /** The gateway's base URL. */
    this.url = url.replace(/\/+$/, "");
    /** @type {string | undefined} */
    this.token = options.token ?? (env.ZKGATE_TOKEN || undefined);
    /** How long to wait for an answer beyond the call's server-side wait, in ms. */
    this.timeout = options.timeout ?? 10_000;
    /** How long (beyond the wait) to retry a call that is safe to repeat, in ms. */
    this.retryFor = options.retryFor ?? 10_000;
    /** How many times a call that could not connect is tried again (within retryFor) before Unreachable. */
    this.connectRetries = Math.max(0, options.connectRetries ?? DEFAULT_CONNECT_RETRIES);
    this.fetch = options.fetch ?? globalThis.fetch;
    if (typeof this.fetch !== "function") throw new ZkgateError("no fetch: zkgate needs Node 18 or later");
    /** How many items the lists ask for a page: the most a gateway gives. */
    this.pageSize = options.pageSize ?? 1000;
    /** Gives the caller's W3C trace context (traceparent, tracestate) for each request; see GatewayOptions. */
    this.traceHeaders = options.traceHeaders;
  }

  /**
   * One HTTP exchange, with the gateway at `o.to` (default: this one's URL).
   * No connection at all is a NotConnected: nothing was sent.
   * @param {string} method
   * @param {string} path
   * @param {{query?: Record<string, string>, body?: string | Uint8Array, type?: string, timeoutMs?: number, signals?: (AbortSignal | undefined)[], to?: string}} [o]
   * @returns {Promise<Reply>}
   */
  async _send(method, path, o = {}) {
    let target = (o.to ?? this.url) + path;
    if (o.query && Object.keys(o.query).length) target += "?" + new URLSearchParams(o.query).toString();
    /** @type {Record<string, string>} */
    const headers = { Accept: "application/json", "User-Agent": `zkgate-node/${VERSION}` };
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    if (o.body !== undefined) headers["Content-Type"] = o.type ?? "application/json";
    if (this.traceHeaders) Object.assign(headers, traceContext(this.traceHeaders()));
    const l = linked(o.signals ?? [], o.timeoutMs);
    try {
      const sent = performance.now();
      const res = await this.fetch(target, { method, headers, body: o.body, signal: l.signal });
      const body = new Uint8Array(await res.arrayBuffer());
      return { status: res.status, headers: res.headers, body, sent };
    } catch (e) {
      if (l.signal.aborted) throw l.signal.reason;
      const cause = /** @type {{cause?: {message?: string, code?: string}, message?: string}} */ (e);
      const Failure = connectFailures.has(cause?.cause?.code ?? "") ? NotConnected : TransportError;
      throw new Failure(`${method} ${target}: ${cause?.cause?.message ?? cause?.message ?? String(e)}`, { cause: e });
    } finally {
      l.done();
    }
  }

  /**
   * A call, retried with backoff until `wait` plus `retryFor` has passed:
   * whatever the call, when it found no connection (nothing was sent;
   * Unreachable once `connectRetries` retries found none either) or was
   * answered 429; and while it is `safe` to repeat (idempotent on the
   * gateway), when the connection broke after it was sent or the answer was
   * 503. A `wait` is sent as `?wait=`, shortened on each retry so that the
   * whole call stays within it. An error of a class in `doneOnRetry`
   * answering a retry means that the first attempt did the work. A call
   * made for a lease (`lease`, or `via` for one that may have ended) goes
   * where the lease moved (see Lease.url). A `grant` (an acquire, a
   * campaign, a claim, an enter) answered as or after its lease ended throws
   * the LeaseLost instead of returning its answer: what it granted is the
   * lease's and ends with it at the gateway, so the caller must not act on
   * it. The lease is asked with check(), which reads the clock: after a
   * stalled event loop its timer may not have run yet.
   * @param {string} method
   * @param {string} path
   * @param {{query?: Record<string, string>, json?: object, raw?: Uint8Array, wait?: Duration, safe?: boolean,
   *   doneOnRetry?: (typeof ZkgateError)[], lease?: Lease, via?: Lease, signal?: AbortSignal, grant?: boolean}} [o]
   * @returns {Promise<Reply>}
   */
  async _call(method, path, o = {}) {
    const query = { ...(o.query ?? {}) };
    let waitMs = 0;
    if (o.wait !== undefined) {
      const [w, ms] = wireDuration(o.wait);
      query.wait = w;
      waitMs = ms;
    }
    /** @type {string | Uint8Array | undefined} */
    let body = o.raw;
    let type = "application/octet-stream";
    if (o.json !== undefined) {
      body = JSON.stringify(o.json);
      type = "application/json";
    }
    const signals = [o.signal, o.lease?.signal];
    const via = o.via ?? o.lease;
    const start = performance.now();
    const deadline = start + waitMs + this.retryFor;
    let dials = 0; // attempts that found no connection to this gateway's URL
    let unknown = false; // an earlier attempt may have done the work
    for (let attempt = 0; ; attempt++) {
      o.lease?.check();
      o.signal?.throwIfAborted?.();
      const left = Math.max(0, waitMs - (performance.now() - start));
      if (o.wait !== undefined && attempt > 0) query.wait = formatDuration(left);
      const to = await via?._target();
      try {
        const r = await this._send(method, path, { query, body, type, timeoutMs: left + this.timeout, signals, to });
        via?._heard(r);
        if (r.status >= 400) throw errorFrom(r.status, r.headers.get("Content-Type") ?? "", r.body, r.headers.get("Retry-After"));
        if (o.grant) o.lease?.check();
        return r;
      } catch (e) {
        if (to !== undefined && e instanceof NotConnected) {
          via?._unreachable(to); // nothing was sent: this gateway's URL passes it on
          attempt--;
          continue;
        }
        if (transient(e)) {
          let err = /** @type {ZkgateError} */ (e);
          if (e instanceof NotConnected) {
            // Nothing was sent, so any call may be tried again: a few times,
            // since a gateway that is down should be told at once; for a
            // lease, while it is known to live (its gateway is on its way
            // back, or another takes its requests).
            dials++;
            err = new Unreachable(`no connection to the gateway at ${this.url} in ${dials} attempts: ${e.detail}`, { cause: e });
            const d = o.lease?.deadline ?? -Infinity;
            const lives = Number.isFinite(d) && performance.now() + backoff(attempt) < d;
            if (dials > this.connectRetries && !lives) throw err;
          } else if (!(o.safe || err instanceof TooMany)) {
            throw err; // a 429 was refused before any work; the others may have been done
          }
          let pause = backoff(attempt);
          if (err.retryAfter !== undefined) pause = Math.max(pause, Math.min(err.retryAfter * 1000, maxRetryAfter));
          if (performance.now() + pause > deadline) throw err;
          if (!(e instanceof NotConnected || e instanceof TooMany)) unknown = true;
          await sleep(pause, signals);
          continue;
        }
        if (o.lease && e instanceof LeaseLost) o.lease._lose(e);
        if (unknown && o.doneOnRetry?.some((c) => e instanceof c)) {
          return { status: 204, headers: new Headers(), body: new Uint8Array(), sent: start };
        }
        throw e;
      }
    }
  }

  /**
   * Creates a lease and keeps it alive until it is revoked (`await using`
   * revokes it at the end of the block). One lease per concurrent holder:
   * a lease is one holder of each name.
   * @param {LeaseOptions} [options]
   * @returns {Promise<Lease>}
   */
  async lease(options = {}) {
    /** @type {LeaseRequest} */
    const req = { ttl: wireDuration(options.ttl ?? "15s")[0] };
    if (options.holder !== undefined) req.holder = options.holder;
    if (options.lockDelay !== undefined) req.lock_delay = wireDuration(options.lockDelay)[0];
    const r = await this._call("POST", "/v1/leases", { json: req, signal: options.signal });
    return new Lease(this, /** @type {LeaseInfo} */ (json(r)), options.onLost, r.sent, r.headers);
  }

  /**
   * A lease made elsewhere, by its id, for acting for it: its claims, acks,
   * locks, releases, `keepAlive()` and `revoke()`. This client does not keep
   * it alive (someone else does, or it is short-lived) and knows nothing of
   * its deadline: `deadline` is Infinity, `ttl` 0, and it ends here only when
   * the gateway says so (410, 404) or by `revoke()`. Sends nothing until it
   * is used.
   * @param {string} id
   * @returns {Lease}
   */
  leaseById(id) {
    pathId(id); // the id goes into the lease's paths as it is
    return new Lease(this, /** @type {LeaseInfo} */ ({ id }), undefined, undefined, undefined, false);
  }

  /**
   * Extends the lease `id` once, for a client that keeps a lease alive
   * itself (`gate.lease()` keeps its own).
   * @param {string} id
   * @param {CallOptions} [options]
   * @returns {Promise<LeaseInfo>}
   */
  async keepAlive(id, options = {}) {
    return json(await this._call("POST", `/v1/leases/${pathId(id)}/keepalive`, { safe: true, signal: options.signal }));
  }

  /**
   * Ends the lease `id`: everything it holds is released before this
   * resolves. A lease that ended already rejects with LeaseExpired (reason
   * `revoked`, `expired`...), unless this call's own first attempt ended it.
   * @param {string} id
   * @param {CallOptions} [options]
   */
  async revokeLease(id, options = {}) {
    await this._call("DELETE", `/v1/leases/${pathId(id)}`, { safe: true, doneOnRetry: [LeaseExpired], signal: options.signal });
  }

  /**
   * The lease and what it holds.
   * @param {string} id
   * @param {CallOptions} [options]
   * @returns {Promise<LeaseInfo>}
   */
  async leaseInfo(id, options = {}) {
    return json(await this._call("GET", `/v1/leases/${pathId(id)}`, { safe: true, signal: options.signal }));
  }

  /**
   * The live leases of every gateway, oldest first, read a page at a time
   * (at most `limit` of them, if given).
   * @param {CallOptions & {limit?: number}} [options]
   * @returns {Promise<LeaseInfo[]>}
   */
  async leases(options = {}) {
    return /** @type {LeaseInfo[]} */ (await this._pages("leases", {}, options));
  }

  /**
   * The primitives of a kind that are in use, in name order (`GET /v1/{kind}`),
   * read a page at a time: every page, or the first `limit` items. Only the
   * locks take a `prefix`.
   * @template {Kind} K
   * @param {K} kind
   * @param {CallOptions & {prefix?: string, limit?: number}} [options]
   * @returns {Promise<ListOf[K][]>}
   */
  async list(kind, options = {}) {
    if (!KINDS.includes(kind)) throw new InvalidRequest(`bad kind ${JSON.stringify(kind)}: one of ${KINDS.join(", ")}`);
    /** @type {Record<string, string>} */
    const query = {};
    if (options.prefix !== undefined) {
      if (kind !== "locks") throw new InvalidRequest("only the locks take a prefix");
      pathName(options.prefix);
      query.prefix = options.prefix;
    }
    return /** @type {ListOf[K][]} */ (await this._pages(kind, query, options));
  }

  /**
   * Every page of the list of `kind`, following each page's `next`, or as
   * many as make `limit` items.
   * @param {string} kind
   * @param {Record<string, string>} query
   * @param {CallOptions & {limit?: number}} options
   * @returns {Promise<object[]>}
   */
  async _pages(kind, query, options) {
    const limit = options.limit;
    if (limit !== undefined && !(Number.isInteger(limit) && limit >= 1)) throw new InvalidRequest("limit must be a whole number, 1 or more");
    const key = kind.replace("-", "_");
    /** @type {object[]} */
    const items = [];
    const q = { ...query };
    for (;;) {
      q.limit = String(limit === undefined ? this.pageSize : Math.min(this.pageSize, limit - items.length));
      const page = /** @type {{next?: string} & Record<string, object[]>} */ (json(await this._call("GET", `/v1/${kind}`, { query: q, safe: true, signal: options.signal })));
      items.push(...page[key]);
      if (limit !== undefined && items.length >= limit) return items.slice(0, limit); // a gateway may give more than asked
      if (!page.next) return items;
      if (page.next === q.after) throw new ZkgateError(`the gateway answered the same page of ${kind} twice`);
      q.after = page.next;
    }
  }

  /**
   * The state of a primitive and its X-Zkgate-Index; with `index` and `wait`, a blocking read.
   * @param {Kind} kind
   * @param {string} name
   * @param {{index?: number, wait?: Duration, signal?: AbortSignal}} [options]
   * @returns {Promise<{state: any, index: number}>}
   */
  async state(kind, name, options = {}) {
    if (!KINDS.includes(kind)) throw new InvalidRequest(`bad kind ${JSON.stringify(kind)}: one of ${KINDS.join(", ")}`);
    const query = options.index ? { index: String(options.index) } : undefined;
    const r = await this._call("GET", `/v1/${kind}/${pathName(name)}`, {
      query, wait: options.wait ?? "0s", safe: true, signal: options.signal,
    });
    const index = Number(r.headers.get("X-Zkgate-Index") ?? "0");
    return { state: json(r), index: Number.isFinite(index) ? index : 0 };
  }

  /**
   * The state of a primitive now, then each time it changes (blocking reads
   * of `wait` each), until `signal` aborts (the loop then throws its reason) or the loop is left.
   * @param {Kind} kind
   * @param {string} name
   * @param {WaitOptions} [options]
   * @returns {AsyncGenerator<any, void, undefined>}
   */
  async *watch(kind, name, options = {}) {
    let index = 0;
    let last = "";
    for (;;) {
      const r = await this.state(kind, name, { index, wait: index ? options.wait ?? "30s" : "0s", signal: options.signal });
      index = r.index;
      const now = JSON.stringify(r.state);
      if (now !== last) {
        last = now;
        yield r.state;
      }
    }
  }

  /**
   * An election's state now and whenever its leader changes: another
   * candidate leads, the leader proclaims a new value, or there is none.
   * Changes of the candidates in line behind the leader are skipped.
   * @param {string} election
   * @param {WaitOptions} [options]
   */
  async *observe(election, options = {}) {
    /** @type {string | undefined} */
    let last;
    for await (const state of this.watch("elections", election, options)) {
      const now = JSON.stringify([state.leader?.node ?? "", state.leader?.value ?? ""]);
      if (now !== last) {
        last = now;
        yield state;
      }
    }
  }

  /**
   * Whether `token` is the fencing token of a current holder of the lock.
   * @param {string} lock
   * @param {number} token
   * @param {CallOptions} [options]
   */
  async fence(lock, token, options = {}) {
    try {
      await this._call("GET", `/v1/locks/${pathName(lock)}/fence`, {
        query: { token: String(token) }, safe: true, signal: options.signal,
      });
      return true;
    } catch (e) {
      if (e instanceof StaleToken) return false;
      throw e;
    }
  }

  /** Whether the gateway answers and its ZooKeeper session is live. @param {CallOptions} [options] */
  async ready(options = {}) {
    try {
      return (await this._send("GET", "/readyz", { timeoutMs: this.timeout, signals: [options.signal] })).status === 200;
    } catch (e) {
      if (e instanceof TransportError) return false;
      throw e;
    }
  }

  /** Raises the barrier: true if it was down, false if already up. @param {string} name @param {CallOptions} [options] */
  async raiseBarrier(name, options = {}) {
    return (await this._call("PUT", `/v1/barriers/${pathName(name)}`, { safe: true, signal: options.signal })).status === 201;
  }

  /** Lowers the barrier, releasing every waiter. @param {string} name @param {CallOptions} [options] */
  async lowerBarrier(name, options = {}) {
    await this._call("DELETE", `/v1/barriers/${pathName(name)}`, { safe: true, signal: options.signal });
  }

  /** Resolves once the barrier is down; Timeout if it is still up after `wait`. @param {string} name @param {WaitOptions} [options] */
  async waitBarrier(name, options = {}) {
    await this._call("POST", `/v1/barriers/${pathName(name)}/wait`, { wait: options.wait ?? "0s", safe: true, signal: options.signal });
  }

  /**
   * A counter (`value`, `version`: -1 while it does not exist, `format`) and
   * its X-Zkgate-Index; with `index` and `wait`, a blocking read. `format` is
   * how its znode holds the value: "decimal" (the default; kazoo's Counter),
   * "int32" (Curator's SharedCount) or "int64" (Curator's
   * DistributedAtomicLong); bytes of another format are FormatMismatch, never
   * a wrong number. Values are JavaScript numbers: exact to 2^53.
   * @param {string} name
   * @param {{format?: CounterFormat, index?: number, wait?: Duration, signal?: AbortSignal}} [options]
   * @returns {Promise<{state: CounterState, index: number}>}
   */
  async counter(name, options = {}) {
    /** @type {Record<string, string>} */
    const query = formatQuery(options.format);
    if (options.index) query.index = String(options.index);
    const r = await this._call("GET", `/v1/counters/${pathName(name)}`, {
      query, wait: options.wait ?? "0s", safe: true, signal: options.signal,
    });
    const index = Number(r.headers.get("X-Zkgate-Index") ?? "0");
    return { state: json(r), index: Number.isFinite(index) ? index : 0 };
  }

  /**
   * Sets the counter to `value`; with `version`, only if it is at that version
   * (-1: only if it does not exist), else VersionMismatch, whose `problem` has
   * the `value` and `version` it is at.
   * @param {string} name
   * @param {number} value
   * @param {{version?: number, format?: CounterFormat, signal?: AbortSignal}} [options]
   * @returns {Promise<CounterState>}
   */
  async setCounter(name, value, options = {}) {
    /** @type {{value: number, version?: number}} */
    const body = { value };
    if (options.version !== undefined) body.version = options.version;
    return json(await this._call("PUT", `/v1/counters/${pathName(name)}`, {
      query: formatQuery(options.format), json: body, safe: true, signal: options.signal,
    }));
  }

  /**
   * Adds `delta` (negative: subtracts), atomically, and returns the counter
   * with the value it made; OutOfRange past the format's range. Not retried
   * once sent: an add whose answer was lost may or may not have been applied.
   * @param {string} name
   * @param {number} delta
   * @param {{format?: CounterFormat, signal?: AbortSignal}} [options]
   * @returns {Promise<CounterState>}
   */
  async addCounter(name, delta, options = {}) {
    return json(await this._call("POST", `/v1/counters/${pathName(name)}/add`, {
      query: formatQuery(options.format), json: { delta }, signal: options.signal,
    }));
  }

  /** Deletes the counter (one that does not exist is no error). @param {string} name @param {CallOptions} [options] */
  async deleteCounter(name, options = {}) {
    await this._call("DELETE", `/v1/counters/${pathName(name)}`, { safe: true, signal: options.signal });
  }

  /**
   * Adds an item (bytes, or text sent as UTF-8). Not retried: a produce whose
   * answer was lost may or may not have added the item.
   * @param {string} queue
   * @param {string | Uint8Array} data
   * With `delay` (a duration) or `notBefore` (a Date or an RFC 3339 string),
   * not both, nobody takes or claims the item before then (at most 30 days
   * ahead); its `id` is then a `due-` id until it is due.
   * @param {string} queue
   * @param {string | Uint8Array} data
   * @param {{priority?: number, delay?: Duration, notBefore?: Date | string, signal?: AbortSignal}} [options]
   * @returns {Promise<ItemInfo>}
   */
  async produce(queue, data, options = {}) {
    const raw = typeof data === "string" ? new TextEncoder().encode(data) : data;
    /** @type {Record<string, string>} */
    const query = {};
    if (options.priority !== undefined) query.priority = String(options.priority);
    if (options.delay !== undefined && options.notBefore !== undefined) throw new InvalidRequest("give delay or notBefore, not both");
    if (options.delay !== undefined) query.delay = wireDuration(options.delay)[0];
    if (options.notBefore !== undefined) {
      query.not_before = options.notBefore instanceof Date ? options.notBefore.toISOString() : String(options.notBefore);
    }
    return json(await this._call("POST", `/v1/queues/${pathName(queue)}/items`, {
      query: Object.keys(query).length ? query : undefined, raw, signal: options.signal,
    }));
  }

  /**
   * Removes and returns the next item (at most once), or null if there is none after `wait`.
   * @param {string} queue
   * @param {WaitOptions} [options]
   * @returns {Promise<Item | null>}
   */
  async take(queue, options = {}) {
    const r = await this._call("POST", `/v1/queues/${pathName(queue)}/take`, { wait: options.wait ?? "0s", signal: options.signal });
    return r.status === 204 ? null : new Item(queue, r);
  }

  /** An item, without taking it. @param {string} queue @param {string} id @param {CallOptions} [options] */
  async peek(queue, id, options = {}) {
    return new Item(queue, await this._call("GET", `/v1/queues/${pathName(queue)}/items/${pathId(id)}`, { safe: true, signal: options.signal }));
  }

  /** Deletes an empty queue (NotEmpty otherwise). @param {string} queue @param {CallOptions} [options] */
  async deleteQueue(queue, options = {}) {
    await this._call("DELETE", `/v1/queues/${pathName(queue)}`, { safe: true, signal: options.signal });
  }
}

// ---------------------------------------------------------------------------
// Leases.

/** The shortest time between keepalives, however near the deadline, in ms. */
const minKeepAlive = 100;

/**
 * The gateway's time `at` on this process's clock (performance.now()): its
 * distance from the answer's X-Zkgate-Time, counted from when the request was
 * sent (never later than the truth, whatever the clocks' offset); undefined
 * without X-Zkgate-Time.
 * @param {number} sent
 * @param {Headers} headers
 * @param {string | null | undefined} at
 */
function onOurClock(sent, headers, at) {
  const then = Date.parse(at ?? "");
  const now = Date.parse(headers.get("X-Zkgate-Time") ?? "");
  if (Number.isNaN(then) || Number.isNaN(now)) return undefined;
  return sent + (then - now);
}

export class Lease {
  /** @type {AbortController} */
  #lost = new AbortController();
  /** @type {NodeJS.Timeout | undefined} the next keepalive */
  #timer;
  /** @type {NodeJS.Timeout | undefined} ends the lease at its deadline */
  #expiry;
  /** @type {AbortController | undefined} */
  #inflight;
  /** @type {Promise<void> | undefined} */
  #ticking;
  #stopped = false;
  #revoked = false;
  #kept = true;
  /** @type {((err: LeaseLost) => void) | undefined} */
  #onLost;
  // The latest expires_at the gateway confirmed and the earliest end of a drain
  // it announced, on this process's clock (performance.now(), ms); the deadline
  // is the earlier. A promise made before a drain began is cut short by the
  // drain, so the two are kept apart and answers may come in any order.
  #promised = -Infinity;
  #drainEnd = Infinity;
  #deadline = -Infinity;
  /** @type {unknown} the latest keepalive's failure */
  #lastFailure;
  /** @type {Set<string>} what the lease holds or is acquiring (see #take) */
  #holding = new Set();
  /** @type {string | undefined} where a handover moved the lease (X-Zkgate-Lease-Moved-To) */
  #moved;
  /** @type {Promise<boolean> | undefined} whether #moved can be connected to */
  #movedConnects;

  /**
   * @param {Gateway} gateway
   * @param {LeaseInfo} info
   * @param {(err: LeaseLost) => void} [onLost]
   * @param {number} [asked] performance.now() when the lease was asked for
   * @param {Headers} [headers] the headers of the answer that made it
   * @param {boolean} [kept] false for a lease kept alive elsewhere (Gateway.leaseById)
   */
  constructor(gateway, info, onLost, asked, headers, kept = true) {
    this.gateway = gateway;
    this.info = info;
    this.id = info.id;
    this.holder = info.holder ?? "";
    /** The TTL in ms: how long the gateway keeps the lease if this client goes silent. */
    this.ttl = kept ? parseDuration(info.ttl) : 0;
    /** The lock-delay in ms. */
    this.lockDelay = parseDuration(info.lock_delay ?? "0s");
    /** @type {LeaseLost | undefined} */
    this.error = undefined;
    this.#onLost = onLost;
    this.#kept = kept;
    if (!kept) {
      // No deadline here: its keepalives are not this client's to count.
      this.#promised = this.#deadline = Infinity;
      this.#stopped = true;
      return;
    }
    const sent = asked ?? performance.now();
    if (headers) {
      this._heard({ status: 201, headers, body: new Uint8Array(), sent });
      this.#confirmed(sent, headers, info.expires_at);
    } else {
      // The lease runs from the moment it was asked for, at the latest.
      this.#promised = sent + this.ttl;
      this.#settle();
    }
    this.#schedule(this.#untilKeepAlive(sent));
  }

  /** Aborted, with the LeaseLost as its reason, when the lease is lost. */
  get signal() {
    return this.#lost.signal;
  }

  /**
   * The base URL the lease's calls go to: the gateway's, or the one that
   * keeps the lease since a handover, once an answer named it with
   * X-Zkgate-Lease-Moved-To (and until it refuses the connection: then the
   * gateway's again, which passes them on).
   */
  get url() {
    return this.#moved ?? this.gateway.url;
  }

  /**
   * Where the lease's next call goes: its keeper since a handover, once a
   * connection to it came within movedConnectTimeout (it is forgotten
   * otherwise), or undefined for the gateway's URL.
   * @returns {Promise<string | undefined>}
   */
  async _target() {
    const to = this.#moved;
    if (to === undefined) return undefined;
    this.#movedConnects ??= connects(to, movedConnectTimeout);
    if (await this.#movedConnects) return to;
    this._unreachable(to);
    return undefined;
  }

  /**
   * Forgets `to` as the lease's keeper: it may have gone, and the gateway's
   * URL passes the lease's calls on to wherever it is kept.
   * @param {string} to
   */
  _unreachable(to) {
    if (this.#moved === to) {
      this.#moved = undefined;
      this.#movedConnects = undefined;
    }
  }

  /** Whether the lease was lost. */
  get lost() {
    return this.error !== undefined;
  }

  /**
   * Until when the gateway last confirmed the lease, on performance.now()'s
   * clock (ms): the earlier of its expires_at and the end of a drain of its
   * gateway, counted from when the request was sent. Stop the work the lease
   * guards by then; it moves with each keepalive.
   */
  get deadline() {
    return this.#deadline;
  }

  /** Throws the LeaseLost that ended the lease, if it ended (also if its deadline has passed). */
  check() {
    if (!this.error && !this.#revoked && performance.now() >= this.#deadline) this.#expire();
    if (this.error) throw this.error;
    if (this.#revoked) throw new LeaseExpired("the lease was revoked by this client", { problem: { reason: "revoked" } });
  }

  /** @param {LeaseLost} err @returns {boolean} whether this call ended the lease */
  _lose(err) {
    if (this.error || this.#revoked) return false;
    this.error = err;
    this.#stop();
    this.#lost.abort(err);
    try {
      this.#onLost?.(err);
    } catch {
      // a callback's failure must not hide the loss: it is in `error` and `signal`
    }
    return true;
  }

  /**
   * Takes the end of a drain, and where the lease moved, from any answer to a
   * call made for the lease. A gateway without X-Zkgate-Time is taken to share
   * this clock.
   * @param {Reply} r
   */
  _heard(r) {
    const moved = gatewayURL(r.headers.get("X-Zkgate-Lease-Moved-To"));
    if (moved !== undefined && moved !== this.#moved) {
      this.#moved = moved === this.gateway.url ? undefined : moved;
      this.#movedConnects = undefined;
    }
    const ends = r.headers.get("X-Zkgate-Lease-Ends");
    if (!ends || !this.#kept) return;
    let at = onOurClock(r.sent, r.headers, ends);
    if (at === undefined) {
      const wall = Date.parse(ends);
      if (Number.isNaN(wall)) return;
      at = r.sent + (wall - Date.now());
    }
    if (at < this.#drainEnd) {
      this.#drainEnd = at;
      this.#settle();
    }
  }

  /**
   * Takes a lease's expires_at from an answer (sent + TTL from a gateway without X-Zkgate-Time).
   * @param {number} sent
   * @param {Headers} headers
   * @param {string | undefined} expiresAt
   */
  #confirmed(sent, headers, expiresAt) {
    const at = onOurClock(sent, headers, expiresAt) ?? sent + this.ttl;
    if (at > this.#promised) {
      this.#promised = at;
      this.#settle();
    }
  }

  /** Sets the deadline from what the gateway said, and the timer that ends the lease then. */
  #settle() {
    const d = Math.min(this.#promised, this.#drainEnd);
    if (d === this.#deadline) return;
    this.#deadline = d;
    this.#arm();
  }

  /** Sets the timer that ends the lease at its deadline. */
  #arm() {
    if (this.#stopped) return;
    clearTimeout(this.#expiry);
    // A timer may fire a little before performance.now() reaches its time: +1.
    this.#expiry = setTimeout(() => this.#expire(), Math.max(0, this.#deadline - performance.now() + 1));
    this.#expiry.unref?.();
  }

  /**
   * Ends the lease when its deadline has come without a newer confirmation,
   * stops the keepalives, and revokes it at the gateway in the background,
   * so that what it held is freed now rather than after its TTL.
   */
  #expire() {
    if (this.error || this.#revoked) return;
    if (performance.now() < this.#deadline) {
      this.#arm(); // early, or a confirmation moved it meanwhile
      return;
    }
    let why = `no keepalive of lease ${this.id} was confirmed before the deadline the gateway promised`;
    if (this.#lastFailure !== undefined) {
      why += ` (the last failure: ${this.#lastFailure instanceof Error ? this.#lastFailure.message : String(this.#lastFailure)})`;
    }
    if (this._lose(new LeaseLost(`${why}: it must be taken as lost`))) void this.#forget();
  }

  /** Revokes the lease at the gateway, best-effort, for at most its TTL (the gateway ends a silent lease then anyway). */
  async #forget() {
    const until = performance.now() + Math.max(this.ttl, 1000);
    let pause = 100;
    for (;;) {
      const left = until - performance.now();
      if (left <= 0) return;
      const to = await this._target();
      try {
        const r = await this.gateway._send("DELETE", `/v1/leases/${this.id}`, { timeoutMs: Math.min(left, this.gateway.timeout), to });
        this._heard(r);
        if (![429, 502, 503, 504].includes(r.status)) return; // revoked, or ended already
      } catch (e) {
        if (to !== undefined && e instanceof NotConnected) {
          this._unreachable(to);
          continue;
        }
        // no answer: try again
      }
      await sleep(Math.min(pause, Math.max(0, until - performance.now())), [], true);
      pause = Math.min(pause * 2, 2000);
    }
  }

  #stop() {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    clearTimeout(this.#expiry);
    this.#expiry = undefined;
    this.#inflight?.abort();
  }

  /** The time until the keepalive after one sent at `sent`: a third of the way to the deadline. @param {number} sent */
  #untilKeepAlive(sent) {
    return Math.max((this.#deadline - sent) / 3, minKeepAlive) - (performance.now() - sent);
  }

  /** @param {number} ms */
  #schedule(ms) {
    this.#timer = setTimeout(() => {
      this.#ticking = this.#tick();
    }, Math.max(0, ms));
    this.#timer.unref?.();
  }

  async #tick() {
    this.#timer = undefined;
    if (this.#stopped) return;
    const to = await this._target();
    if (this.#stopped) return;
    const left = this.#deadline - performance.now();
    if (left <= 0) return; // the expiry timer ends the lease
    let next;
    const inflight = new AbortController();
    this.#inflight = inflight;
    try {
      const r = await this.gateway._send("POST", `/v1/leases/${this.id}/keepalive`, {
        timeoutMs: Math.max(50, left), signals: [inflight.signal], to,
      });
      this._heard(r);
      if (r.status >= 400) throw errorFrom(r.status, r.headers.get("Content-Type") ?? "", r.body, r.headers.get("Retry-After"));
      this.info = json(r);
      this.#confirmed(r.sent, r.headers, this.info.expires_at);
      next = this.#untilKeepAlive(r.sent);
    } catch (e) {
      if (this.#stopped) return;
      if (to !== undefined && e instanceof NotConnected) {
        this._unreachable(to); // nothing was sent: the gateway's URL passes it on
        next = 0;
      } else if (transient(e)) {
        // Transient, and confirms nothing (a 503 says the gateway's ZooKeeper
        // session is suspended): try again soon, until the deadline.
        this.#lastFailure = e;
        const err = /** @type {ZkgateError} */ (e);
        const wait = err.retryAfter === undefined ? 250 : err.retryAfter * 1000;
        next = Math.max(50, Math.min(wait, this.#deadline - performance.now()));
      } else if (e instanceof LeaseLost) {
        this._lose(e);
        return;
      } else {
        // unauthenticated, forbidden...: no keepalive will ever pass
        const z = e instanceof ZkgateError ? e : undefined;
        this._lose(new LeaseLost(`keepalive of lease ${this.id} refused: ${e instanceof Error ? e.message : String(e)}`, {
          status: z?.status, code: z?.code, problem: z?.problem, cause: e,
        }));
        return;
      }
    } finally {
      if (this.#inflight === inflight) this.#inflight = undefined;
    }
    if (!this.#stopped) this.#schedule(next);
  }

  /**
   * Marks what the lease is acquiring, unless it holds or acquires it already:
   * AlreadyHeld then.
   * @param {string} kind
   * @param {string} name
   * @param {string} [mode]
   */
  #take(kind, name, mode) {
    const key = `${kind}\0${name}\0${mode ?? ""}`;
    if (this.#holding.has(key)) {
      const what = `${kind} ${JSON.stringify(name)}${mode && mode !== "exclusive" ? ` (${mode})` : ""}`;
      throw new AlreadyHeld(`lease ${this.id} already holds (or is acquiring) ${what}: one lease is one holder; take a lease per concurrent holder`);
    }
    this.#holding.add(key);
  }

  /**
   * Frees what of `name` the lease held (every mode of a lock without `mode`),
   * once it was released or its acquire failed.
   * @param {string} kind
   * @param {string} name
   * @param {string} [mode]
   */
  #drop(kind, name, mode) {
    for (const key of [...this.#holding]) {
      const [k, n, m] = key.split("\0");
      if (k === kind && n === name && (mode === undefined || m === mode)) this.#holding.delete(key);
    }
  }

  /** Extends the lease now (the keepalive does it anyway). @param {CallOptions} [options] @returns {Promise<LeaseInfo>} */
  async keepAlive(options = {}) {
    const r = await this.gateway._call("POST", `/v1/leases/${this.id}/keepalive`, { safe: true, lease: this, signal: options.signal });
    this.info = json(r);
    this.#confirmed(r.sent, r.headers, this.info.expires_at);
    return this.info;
  }

  /**
   * Stops the keepalive and revokes the lease: everything it holds is
   * released before this resolves. Throws the LeaseLost if it was lost.
   */
  async revoke() {
    const already = this.#revoked;
    this.#revoked = true;
    this.#stop();
    await this.#ticking;
    if (already) return;
    if (this.error) throw this.error;
    try {
      await this.gateway._call("DELETE", `/v1/leases/${this.id}`, { safe: true, doneOnRetry: [LeaseExpired], via: this });
    } catch (e) {
      if (e instanceof LeaseExpired && e.reason !== "revoked") {
        this.error = e;
        this.#lost.abort(e);
      }
      if (!(e instanceof LeaseExpired && e.reason === "revoked")) throw e;
    }
  }

  /** `await using lease = await gate.lease()` revokes it at the end of the block. */
  [asyncDispose]() {
    return this.revoke();
  }

  /**
   * Acquires the lock, waiting up to `wait`; Timeout if the wait ends first.
   * @param {string} name
   * @param {WaitOptions & {mode?: LockMode}} [options]
   * @returns {Promise<Grant>}
   */
  async lock(name, options = {}) {
    const mode = options.mode ?? "exclusive";
    if (!["exclusive", "read", "write"].includes(mode)) throw new InvalidRequest(`bad mode ${JSON.stringify(mode)}: exclusive, read or write`);
    /** @type {LockAcquireRequest} */
    const req = { lease: this.id, mode };
    const path = `/v1/locks/${pathName(name)}/acquire`;
    this.#take("lock", name, mode);
    try {
      const r = await this.gateway._call("POST", path, {
        json: req, wait: options.wait ?? "0s", safe: true, lease: this, grant: true, signal: options.signal,
      });
      return new Grant(this, "lock", /** @type {LockGrantInfo} */ (json(r)));
    } catch (e) {
      this.#drop("lock", name, mode);
      throw e;
    }
  }

  /**
   * Acquires every lock of `locks` (names, or `{name, mode}`), all or nothing, as Curator's
   * InterProcessMultiLock: the gateway takes them in one order (by name), so that two sets never
   * deadlock each other, within `wait` for the whole set. If one cannot be had, the error is that
   * lock's (Timeout, Deadlock...; `problem.lock` names it) and none of the locks this call took is
   * held.
   * @param {Array<string | {name: string, mode?: LockMode}>} locks
   * @param {WaitOptions} [options]
   * @returns {Promise<LockSet>}
   */
  async lockAll(locks, options = {}) {
    const set = lockSet(locks);
    /** @type {LockRequest[]} */
    const taken = [];
    try {
      for (const l of set) {
        this.#take("lock", l.name, l.mode);
        taken.push(l);
      }
      /** @type {LockSetAcquireRequest} */
      const req = { lease: this.id, locks: set };
      const r = await this.gateway._call("POST", "/v1/locks/acquire", {
        json: req, wait: options.wait ?? "0s", safe: true, lease: this, grant: true, signal: options.signal,
      });
      const got = /** @type {{locks: LockGrantInfo[]}} */ (json(r));
      return new LockSet(this, set, got.locks.map((g) => new Grant(this, "lock", g)));
    } catch (e) {
      for (const l of taken) this.#drop("lock", l.name, l.mode);
      throw e;
    }
  }

  /**
   * Releases every lock of `locks` (as given to lockAll). Locks of the set the lease did not hold
   * throw NotHeld, once the others are released.
   * @param {Array<string | {name: string, mode?: LockMode}>} locks
   * @param {CallOptions} [options]
   */
  async releaseAll(locks, options = {}) {
    const set = lockSet(locks);
    /** @type {LockSetReleaseRequest} */
    const req = { lease: this.id, locks: set };
    try {
      await this.gateway._call("POST", "/v1/locks/release", { json: req, safe: true, lease: this, doneOnRetry: [NotHeld], signal: options.signal });
    } finally {
      for (const l of set) this.#drop("lock", l.name, l.mode);
    }
  }

  /**
   * Acquires one of the `limit` slots of the semaphore, waiting up to `wait`.
   * @param {string} name
   * @param {number} limit
   * @param {WaitOptions} [options]
   * @returns {Promise<Grant>}
   */
  async semaphore(name, limit, options = {}) {
    /** @type {SemaphoreAcquireRequest} */
    const req = { lease: this.id, limit };
    const path = `/v1/semaphores/${pathName(name)}/acquire`;
    this.#take("semaphore", name);
    try {
      const r = await this.gateway._call("POST", path, {
        json: req, wait: options.wait ?? "0s", safe: true, lease: this, grant: true, signal: options.signal,
      });
      return new Grant(this, "semaphore", /** @type {SemaphoreGrantInfo} */ (json(r)));
    } catch (e) {
      this.#drop("semaphore", name);
      throw e;
    }
  }

  /**
   * Releases a lock (every mode, or `mode`) or a semaphore slot.
   * @param {"lock" | "semaphore"} kind
   * @param {string} name
   * @param {{mode?: LockMode, signal?: AbortSignal}} [options]
   */
  async release(kind, name, options = {}) {
    /** @type {string} */
    let path;
    /** @type {LockReleaseRequest | LeaseOnlyRequest} */
    let req;
    if (kind === "lock") {
      path = `/v1/locks/${pathName(name)}/release`;
      /** @type {LockReleaseRequest} */
      const lr = { lease: this.id };
      if (options.mode) lr.mode = options.mode;
      req = lr;
    } else if (kind === "semaphore") {
      path = `/v1/semaphores/${pathName(name)}/release`;
      req = { lease: this.id };
    } else {
      throw new InvalidRequest(`bad kind ${JSON.stringify(kind)}: lock or semaphore`);
    }
    try {
      await this.gateway._call("POST", path, { json: req, safe: true, lease: this, doneOnRetry: [NotHeld], signal: options.signal });
    } finally {
      this.#drop(kind, name, kind === "lock" ? options.mode : undefined);
    }
  }

  /**
   * Runs for leader, waiting up to `wait` to be elected. The candidacy stays
   * until resign (`await using` resigns) or the end of the lease.
   * @param {string} name
   * @param {WaitOptions & {value?: string}} [options]
   * @returns {Promise<Campaign>}
   */
  async campaign(name, options = {}) {
    /** @type {CampaignRequest} */
    const req = { lease: this.id, value: options.value ?? "" };
    const path = `/v1/elections/${pathName(name)}/campaign`;
    this.#take("election", name);
    let elected = false;
    try {
      const r = await this.gateway._call("POST", path, {
        json: req, wait: options.wait ?? "0s", safe: true, lease: this, grant: true, signal: options.signal,
      });
      const c = new Campaign(this, /** @type {CampaignInfo} */ (json(r)));
      elected = c.elected;
      return c;
    } finally {
      if (!elected) this.#drop("election", name); // a candidate in line holds nothing yet: campaign again resumes
    }
  }

  /**
   * Campaigns in rounds of `round` (default "30s"; the gateway's --max-wait
   * at most) until the lease is elected, and returns the leadership. With
   * `wait`, if that passes first, or if `signal` aborts, the candidacy is
   * withdrawn before Timeout (or the signal's reason) is thrown.
   * @param {string} name
   * @param {CallOptions & {value?: string, round?: Duration, wait?: Duration}} [options]
   * @returns {Promise<Campaign>}
   */
  async lead(name, options = {}) {
    const round = parseDuration(options.round ?? "30s");
    if (round <= 0) throw new InvalidRequest("the round of lead must be positive");
    const until = options.wait === undefined ? undefined : performance.now() + parseDuration(options.wait);
    try {
      for (;;) {
        const step = until === undefined ? round : Math.max(0, Math.min(round, until - performance.now()));
        const c = await this.campaign(name, { value: options.value, wait: step, signal: options.signal });
        if (c.elected) return c;
        if (until !== undefined && performance.now() >= until) {
          throw new Timeout(`lease ${this.id} was not elected leader of ${JSON.stringify(name)} within ${String(options.wait)}`);
        }
      }
    } catch (e) {
      if ((e instanceof Timeout || options.signal?.aborted) && !this.lost && !this.#revoked) {
        await this.resign(name).catch(() => {}); // the lease's end withdraws it anyway
      }
      throw e;
    }
  }

  /**
   * Sets the leader's value; NotLeader unless this lease leads.
   * @param {string} name
   * @param {string} value
   * @param {CallOptions} [options]
   * @returns {Promise<CampaignInfo>}
   */
  async proclaim(name, value, options = {}) {
    /** @type {ProclaimRequest} */
    const req = { lease: this.id, value };
    return json(await this.gateway._call("PUT", `/v1/elections/${pathName(name)}/value`, { json: req, safe: true, lease: this, signal: options.signal }));
  }

  /** Withdraws the candidacy (and leadership). @param {string} name @param {CallOptions} [options] */
  async resign(name, options = {}) {
    /** @type {LeaseOnlyRequest} */
    const req = { lease: this.id };
    try {
      await this.gateway._call("POST", `/v1/elections/${pathName(name)}/resign`, {
        json: req, safe: true, lease: this, doneOnRetry: [NotHeld], signal: options.signal,
      });
    } finally {
      this.#drop("election", name);
    }
  }

  /**
   * Enters the double barrier as `member` (default: the lease id) and waits
   * up to `wait` for `count` members; Timeout otherwise (the membership is
   * kept: enter again to go on waiting).
   * @param {string} name
   * @param {number} count
   * @param {WaitOptions & {member?: string}} [options]
   * @returns {Promise<Membership>}
   */
  async enter(name, count, options = {}) {
    const member = options.member ?? this.id;
    pathName(member);
    /** @type {EnterRequest} */
    const req = { lease: this.id, member, count };
    const wait = options.wait ?? "0s";
    const r = await this.gateway._call("POST", `/v1/double-barriers/${pathName(name)}/enter`, {
      json: req, wait, safe: true, lease: this, grant: true, signal: options.signal,
    });
    return new Membership(this, name, member, wait, /** @type {DoubleBarrierInfo} */ (json(r)));
  }

  /**
   * Leaves the double barrier and waits up to `wait` for every member to leave.
   * @param {string} name
   * @param {WaitOptions & {member?: string}} [options]
   * @returns {Promise<DoubleBarrierState>}
   */
  async leave(name, options = {}) {
    /** @type {LeaveRequest} */
    const req = { lease: this.id, member: options.member ?? this.id };
    return json(await this.gateway._call("POST", `/v1/double-barriers/${pathName(name)}/leave`, {
      json: req, wait: options.wait ?? "0s", safe: true, lease: this, signal: options.signal,
    }));
  }

  /**
   * Joins the group as `member` (default: the lease id), with `value` as its
   * data, until it leaves or the lease ends; joining again with the same
   * member and value finds the same member.
   * @param {string} name
   * @param {CallOptions & {member?: string, value?: string}} [options]
   * @returns {Promise<GroupMembership>}
   */
  async join(name, options = {}) {
    /** @type {JoinRequest} */
    const req = { lease: this.id, value: options.value ?? "" };
    if (options.member !== undefined) req.member = pathName(options.member);
    const r = await this.gateway._call("POST", `/v1/groups/${pathName(name)}/join`, {
      json: req, safe: true, lease: this, grant: true, signal: options.signal,
    });
    const info = /** @type {GroupInfo} */ (json(r));
    return new GroupMembership(this, name, info.member, info);
  }

  /**
   * Leaves the group (`member` defaults to the lease id); a repeat that finds
   * the member gone is the success it repeats.
   * @param {string} name
   * @param {CallOptions & {member?: string}} [options]
   */
  async leaveGroup(name, options = {}) {
    /** @type {GroupLeaveRequest} */
    const req = { lease: this.id, member: pathName(options.member ?? this.id) };
    await this.gateway._call("POST", `/v1/groups/${pathName(name)}/leave`, {
      json: req, safe: true, lease: this, doneOnRetry: [NotHeld], signal: options.signal,
    });
  }

  /**
   * Claims the next item (at least once), or null if there is none after `wait`.
   * @param {string} queue
   * @param {WaitOptions} [options]
   * @returns {Promise<Claim | null>}
   */
  async claim(queue, options = {}) {
    /** @type {LeaseOnlyRequest} */
    const req = { lease: this.id };
    const r = await this.gateway._call("POST", `/v1/queues/${pathName(queue)}/claim`, {
      json: req, wait: options.wait ?? "0s", safe: true, lease: this, grant: true, signal: options.signal,
    });
    return r.status === 204 ? null : new Claim(this, queue, r);
  }

  /** Consumes a claimed item. @param {string} queue @param {string} id @param {CallOptions} [options] */
  async ack(queue, id, options = {}) {
    /** @type {LeaseOnlyRequest} */
    const req = { lease: this.id };
    await this.gateway._call("POST", `/v1/queues/${pathName(queue)}/items/${pathId(id)}/ack`, {
      json: req, safe: true, lease: this, doneOnRetry: [NotClaimed], signal: options.signal,
    });
  }

  /** Gives a claimed item back: it is served again. @param {string} queue @param {string} id @param {CallOptions} [options] */
  async nack(queue, id, options = {}) {
    /** @type {LeaseOnlyRequest} */
    const req = { lease: this.id };
    await this.gateway._call("POST", `/v1/queues/${pathName(queue)}/items/${pathId(id)}/nack`, {
      json: req, safe: true, lease: this, doneOnRetry: [NotClaimed], signal: options.signal,
    });
  }

  /**
   * Claims items one at a time: `for await (const item of lease.consume("emails"))`.
   * An item is acked when the loop body ends and the loop asks for the next;
   * if the loop is left any other way (throw, break, return) it is nacked,
   * unless the body acked or nacked it itself.
   * @param {string} queue
   * @param {WaitOptions & {untilEmpty?: boolean}} [options]
   * @returns {AsyncGenerator<Claim, void, undefined>}
   */
  async *consume(queue, options = {}) {
    const wait = options.wait ?? "30s";
    for (;;) {
      const item = await this.claim(queue, { wait, signal: options.signal });
      if (!item) {
        if (options.untilEmpty) return;
        continue;
      }
      let finished = false;
      try {
        yield item;
        finished = true;
      } finally {
        if (!finished) await item._settleQuietly();
      }
      if (!item.settled) await item.ack();
    }
  }
}

// ---------------------------------------------------------------------------
// What a lease holds.

export class Grant {
  /**
   * @param {Lease} lease
   * @param {"lock" | "semaphore"} kind
   * @param {LockGrantInfo | SemaphoreGrantInfo} info
   */
  constructor(lease, kind, info) {
    this.lease = lease;
    this.kind = kind;
    this.info = info;
    this.name = info.name;
    /** The fencing token. */
    this.token = info.token;
    this.node = info.node;
    this.acquiredAt = info.acquired_at;
    /** @type {LockMode | undefined} */
    this.mode = "mode" in info ? info.mode : undefined;
    /** @type {number | undefined} */
    this.limit = "limit" in info ? info.limit : undefined;
    this.released = false;
  }

  /** Releases it (once). @param {CallOptions} [options] */
  async release(options = {}) {
    if (this.released) return;
    this.released = true;
    await this.lease.release(this.kind, this.name, { mode: this.kind === "lock" ? this.mode : undefined, signal: options.signal });
  }

  /** Whether the token still belongs to a holder of the lock. @param {CallOptions} [options] */
  isCurrent(options = {}) {
    if (this.kind !== "lock") throw new InvalidRequest("fencing tokens are checked for locks only");
    return this.lease.gateway.fence(this.name, this.token, options);
  }

  [asyncDispose]() {
    return this.release();
  }
}

/**
 * The `locks` of a set's request: each a name or `{name, mode}`, named once, each mode explicit.
 * @param {Array<string | {name: string, mode?: LockMode}>} locks
 * @returns {LockRequest[]}
 */
function lockSet(locks) {
  if (!Array.isArray(locks) || locks.length < 1 || locks.length > MAX_LOCK_SET) {
    throw new InvalidRequest(`a set names from 1 to ${MAX_LOCK_SET} locks, as an array`);
  }
  const seen = new Set();
  return locks.map((l) => {
    const { name, mode = "exclusive" } = typeof l === "string" ? { name: l } : l;
    if (!["exclusive", "read", "write"].includes(mode)) throw new InvalidRequest(`bad mode ${JSON.stringify(mode)}: exclusive, read or write`);
    pathName(name);
    if (seen.has(name)) throw new InvalidRequest(`lock ${JSON.stringify(name)} is named twice in the set`);
    seen.add(name);
    return { name, mode };
  });
}

/** Locks held together (Lease.lockAll): `grants` in the order they were taken (by name). */
export class LockSet {
  /**
   * @param {Lease} lease
   * @param {LockRequest[]} locks
   * @param {Grant[]} grants
   */
  constructor(lease, locks, grants) {
    this.lease = lease;
    this.locks = locks;
    this.grants = grants;
    this.released = false;
  }

  /** Releases every lock of the set (once). @param {CallOptions} [options] */
  async release(options = {}) {
    if (this.released) return;
    this.released = true;
    for (const g of this.grants) g.released = true;
    await this.lease.releaseAll(this.locks, options);
  }

  [asyncDispose]() {
    return this.release();
  }
}

export class Campaign {
  /** @param {Lease} lease @param {CampaignInfo} info */
  constructor(lease, info) {
    this.lease = lease;
    this.info = info;
    this.name = info.name;
    this.elected = info.elected;
    /** @type {number | undefined} */
    this.token = info.token;
    /** @type {number | undefined} */
    this.position = info.position;
    /** @type {Holder | undefined} */
    this.leader = info.leader;
    this.value = info.value;
    this.resigned = false;
  }

  /** Sets the leader's value (NotLeader unless elected). @param {string} value @param {CallOptions} [options] */
  async proclaim(value, options = {}) {
    this.info = await this.lease.proclaim(this.name, value, options);
    this.value = value;
  }

  /** Withdraws the candidacy (once). @param {CallOptions} [options] */
  async resign(options = {}) {
    if (this.resigned) return;
    this.resigned = true;
    await this.lease.resign(this.name, options);
  }

  [asyncDispose]() {
    return this.resign();
  }
}

/** A member of a group; `await using` (or leave()) leaves. */
export class GroupMembership {
  /**
   * @param {Lease} lease
   * @param {string} name
   * @param {string} member
   * @param {GroupInfo} info
   */
  constructor(lease, name, member, info) {
    this.lease = lease;
    this.name = name;
    this.member = member;
    this.info = info;
    /** @type {GroupMember[]} */
    this.members = info.members;
    this.left = false;
  }

  /** Leaves the group (once). @param {CallOptions} [options] */
  async leave(options = {}) {
    if (this.left) return;
    this.left = true;
    await this.lease.leaveGroup(this.name, { member: this.member, signal: options.signal });
  }

  [asyncDispose]() {
    return this.leave();
  }
}

export class Membership {
  /**
   * @param {Lease} lease
   * @param {string} name
   * @param {string} member
   * @param {Duration} wait
   * @param {DoubleBarrierInfo} info
   */
  constructor(lease, name, member, wait, info) {
    this.lease = lease;
    this.name = name;
    this.member = member;
    this.wait = wait;
    this.info = info;
    /** @type {Member[]} */
    this.members = info.members;
    this.left = false;
  }

  /** Leaves, waiting up to `wait` (default the enter's) for every member to leave. @param {WaitOptions} [options] */
  async leave(options = {}) {
    if (this.left) return;
    this.left = true;
    await this.lease.leave(this.name, { member: this.member, wait: options.wait ?? this.wait, signal: options.signal });
  }

  [asyncDispose]() {
    return this.leave();
  }
}

export class Item {
  /** @param {string} queue @param {Reply} r */
  constructor(queue, r) {
    this.queue = queue;
    this.id = r.headers.get("X-Zkgate-Item-Id") ?? "";
    const p = Number(r.headers.get("X-Zkgate-Item-Priority") ?? "100");
    this.priority = Number.isInteger(p) ? p : 100;
    this.data = r.body;
  }

  /** The data as UTF-8 text. */
  get text() {
    return new TextDecoder().decode(this.data);
  }
}

export class Claim extends Item {
  /** @param {Lease} lease @param {string} queue @param {Reply} r */
  constructor(lease, queue, r) {
    super(queue, r);
    this.lease = lease;
    this.settled = false;
  }

  /** Consumes the item. @param {CallOptions} [options] */
  async ack(options = {}) {
    this.settled = true;
    await this.lease.ack(this.queue, this.id, options);
  }

  /** Gives the item back. @param {CallOptions} [options] */
  async nack(options = {}) {
    this.settled = true;
    await this.lease.nack(this.queue, this.id, options);
  }

  /** Nacks, quietly: an exception is on its way already, and a lease that ended gives the item back by itself. */
  async _settleQuietly() {
    if (this.settled) return;
    try {
      await this.nack();
    } catch {
      // see above
    }
  }
}
