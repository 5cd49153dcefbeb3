// Types of the zkgate Node client. The JSON documents below are those of
// openapi.yaml; scripts/test-clients.sh checks them against types generated
// from it, so a change of the contract that the client does not follow
// breaks the build.

/** A Go duration string ("500ms", "15s", "2m") or a number of milliseconds. */
export type Duration = string | number;
export type Kind = "locks" | "semaphores" | "elections" | "barriers" | "double-barriers" | "queues" | "groups"
  | "counters";
/** How a counter's znode holds its value. */
export type CounterFormat = "decimal" | "int32" | "int64";
export declare const COUNTER_FORMATS: readonly CounterFormat[];
export type LockMode = "exclusive" | "read" | "write";

export declare const VERSION: string;
export declare const DEFAULT_URL: string;
/** How many times a call that could not connect is tried again, by default. */
export declare const DEFAULT_CONNECT_RETRIES: number;
/** The gateway URL a client uses: `url`, else $ZKGATE_URL, else DEFAULT_URL; host:port means http://host:port. */
export declare function gatewayURLOf(url?: string): string;

// `await using` disposes of a lease, grant, campaign or membership where
// Symbol.asyncDispose is known (TypeScript's esnext.disposable lib, or
// @types/node); these declarations compile without either.
type AsyncDisposeKey = SymbolConstructor extends { readonly asyncDispose: infer S extends symbol } ? S : never;
/** `[Symbol.asyncDispose]()`, where the symbol is known. */
type AsyncDisposal = { [K in AsyncDisposeKey]: () => Promise<void> };
export declare const KINDS: readonly Kind[];
/** The most locks one set (Lease.lockAll) may name. */
export declare const MAX_LOCK_SET: number;

// ---------------------------------------------------------------------------
// JSON documents the gateway answers with.

/** One contender of a lock, semaphore or election, as any client sees it. */
export interface Holder {
  node: string;
  seq: number;
  /** The node's creation zxid: its fencing token. */
  token: number;
  mode?: LockMode;
  lease?: string;
  holder: string;
  /** The ZooKeeper session id; with tokens, shown only to a token with admin on the name. */
  session?: string;
  since: string;
  /** A node made by another client (Curator, kazoo). */
  foreign: boolean;
  gateway?: string;
  value?: string;
  limit?: number;
}

export interface Hold {
  kind: "lock" | "semaphore" | "election" | "double-barrier" | "claim" | "group";
  name: string;
  mode?: string;
  token?: number;
  state: "held" | "waiting";
  node?: string;
  since: string;
}

export interface LeaseInfo {
  id: string;
  /** The id of the gateway that keeps the lease. */
  gateway: string;
  /** How long the gateway keeps the lease without a keepalive. */
  ttl: string;
  holder: string;
  lock_delay: string;
  /** Until when what the lease holds is certainly its own, on the gateway's clock (see Lease.deadline). */
  expires_at: string;
  /** When the lease was last kept alive (or made), on the gateway's clock: without a keepalive it ends ttl after this. */
  renewed_at: string;
  created_at: string;
  holds: Hold[];
}

export interface LockGrantInfo {
  name: string;
  mode: LockMode;
  lease: string;
  token: number;
  node: string;
  acquired_at: string;
}

export interface SemaphoreGrantInfo {
  name: string;
  lease: string;
  limit: number;
  token: number;
  node: string;
  acquired_at: string;
}

/** A lease's standing in an election: elected (with `token`) or in line (with `position` and `leader`). */
export interface CampaignInfo {
  name: string;
  elected: boolean;
  lease: string;
  node: string;
  token?: number;
  value: string;
  since: string;
  position?: number;
  leader?: Holder;
}

export interface Member {
  member: string;
  lease?: string;
  holder: string;
  gateway?: string;
  count?: number;
  since: string;
  foreign: boolean;
}

export interface DoubleBarrierState {
  name: string;
  count?: number;
  ready: boolean;
  members: Member[];
}

export interface DoubleBarrierInfo extends DoubleBarrierState {
  lease: string;
}

/** A member of a group; `foreign` marks one kazoo's Party or Curator's GroupMember made. */
export interface GroupMember {
  member: string;
  node: string;
  lease?: string;
  holder?: string;
  gateway?: string;
  value?: string;
  since: string;
  foreign: boolean;
}

export interface GroupState {
  name: string;
  members: GroupMember[];
}

export interface GroupInfo extends GroupState {
  member: string;
  lease: string;
}

export interface ItemInfo {
  id: string;
  priority: number;
  size: number;
  created_at: string;
  claimed_by?: string;
  /** A delayed item's due time (the answer of a produce with delay or notBefore). */
  not_before?: string;
}

export interface LockState {
  name: string;
  holders: Holder[];
  waiters: Holder[];
}

export interface SemaphoreState {
  name: string;
  limit?: number;
  holders: Holder[];
  waiters: Holder[];
}

export interface ElectionState {
  name: string;
  leader: Holder | null;
  candidates: Holder[];
}

export interface BarrierState {
  name: string;
  raised: boolean;
  since?: string;
}

export interface CounterState {
  name: string;
  value: number;
  /** The node's data version; -1 while the counter does not exist. */
  version: number;
  format: CounterFormat;
}

/** One line of GET /v1/counters: the value in every format the bytes fit. */
export interface CounterSummary {
  name: string;
  version: number;
  values: { decimal?: number; int32?: number; int64?: number };
}

export interface QueueState {
  name: string;
  length: number;
  claimed: number;
  /** Delayed items not yet due (not in length nor head), and the earliest due time among them. */
  delayed: number;
  next_due?: string;
  head: ItemInfo[];
}

/** One line of GET /v1/locks. */
export interface LockSummary {
  name: string;
  holders: number;
  waiters: number;
}

/** One line of GET /v1/semaphores. */
export interface SemaphoreSummary {
  name: string;
  limit?: number;
  holders: number;
  waiters: number;
}

/** One line of GET /v1/elections. */
export interface ElectionSummary {
  name: string;
  leader: Holder | null;
  candidates: number;
}

/** What each kind's list holds. */
export interface ListOf {
  locks: LockSummary;
  semaphores: SemaphoreSummary;
  elections: ElectionSummary;
  barriers: BarrierState;
  "double-barriers": DoubleBarrierState;
  queues: QueueState;
  groups: GroupState;
  counters: CounterSummary;
}

export interface StateOf {
  locks: LockState;
  semaphores: SemaphoreState;
  elections: ElectionState;
  barriers: BarrierState;
  "double-barriers": DoubleBarrierState;
  queues: QueueState;
  groups: GroupState;
  counters: CounterState;
}

/** An RFC 9457 problem document, with the extra state some problems carry. */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: string;
  instance?: string;
  reason?: string;
  holders?: Holder[];
  waiters?: number;
  position?: number;
  token?: number;
  limit?: number;
  raised?: boolean;
  members?: Member[];
  count?: number;
  lease?: string;
  /** deadlock only: the cycle of waits, the one ended first. */
  cycle?: CycleStep[];
  /** version_mismatch, out_of_range: the counter's value now. */
  value?: number;
  /** version_mismatch, out_of_range, format_mismatch: the counter's version now. */
  version?: number;
  format?: CounterFormat;
  /** format_mismatch only: the length of the node's data, and the formats it fits. */
  bytes?: number;
  fits?: CounterFormat[];
}

/** One party of a deadlock and what it waits for, which the next step's party holds. */
export interface CycleStep {
  /** A zkgate lease, or for another client's node (Curator, kazoo) its ZooKeeper session. */
  lease?: string;
  /** With tokens, shown only to a token with admin on the name. */
  session?: string;
  /** A step on a name the caller may not read: only its kind is shown. */
  hidden?: boolean;
  holder?: string;
  gateway?: string;
  kind: "lock" | "semaphore";
  name?: string;
  mode?: LockMode;
  node?: string;
  blocker?: string;
  blocker_mode?: LockMode;
}

/** JSON bodies the client sends. */
export namespace wire {
  interface LeaseRequest {
    ttl?: string;
    holder?: string;
    lock_delay?: string;
  }
  interface LockAcquireRequest {
    lease: string;
    mode?: LockMode;
  }
  interface LockReleaseRequest {
    lease: string;
    mode?: LockMode;
  }
  interface LockRequest {
    name: string;
    mode?: LockMode;
  }
  interface LockSetAcquireRequest {
    lease: string;
    locks: LockRequest[];
  }
  interface LockSetReleaseRequest {
    lease: string;
    locks: LockRequest[];
  }
  interface SemaphoreAcquireRequest {
    lease: string;
    limit: number;
  }
  interface CounterSetRequest {
    value: number;
    version?: number;
  }
  interface CounterAddRequest {
    delta: number;
  }
  interface LeaseOnlyRequest {
    lease: string;
  }
  interface CampaignRequest {
    lease: string;
    value?: string;
  }
  interface ProclaimRequest {
    lease: string;
    value: string;
  }
  interface EnterRequest {
    lease: string;
    member: string;
    count: number;
  }
  interface LeaveRequest {
    lease: string;
    member: string;
  }
  interface JoinRequest {
    lease: string;
    member?: string;
    value?: string;
  }
  interface GroupLeaveRequest {
    lease: string;
    member?: string;
  }
}

// ---------------------------------------------------------------------------
// Errors: one class per problem code.

export declare class ZkgateError extends Error {
  static code: string | undefined;
  constructor(
    detail: string,
    info?: { status?: number; code?: string; problem?: Problem | Record<string, unknown>; retryAfter?: number; cause?: unknown },
  );
  /** The problem's human-readable detail. */
  detail: string;
  /** The HTTP status; undefined when there was no answer. */
  status: number | undefined;
  /** The problem's code ("timeout", "lease_expired"...). */
  code: string | undefined;
  /** The whole problem document, with any extra state (holders, position, reason...). */
  problem: Partial<Problem> & Record<string, unknown>;
  /** Seconds of a Retry-After header. */
  retryAfter: number | undefined;
}
/** No answer: the gateway could not be reached, or the connection broke or timed out. The request may or may not have been carried out. */
export declare class TransportError extends ZkgateError {}
/**
 * No connection to the gateway could be made (refused, no route, unknown host) in
 * 1 + connectRetries attempts: nothing was sent. The message names the gateway's URL.
 */
export declare class Unreachable extends TransportError {}
/** 400 invalid_request, or a request the client refuses to send (a bad name or duration). */
export declare class InvalidRequest extends ZkgateError {}
/**
 * The lease already holds, or is acquiring, that lock, semaphore or election:
 * one lease is one holder. Take a lease per concurrent holder. No request was sent.
 */
export declare class AlreadyHeld extends InvalidRequest {}
/** The lease is gone (expired, revoked, its gateway's session lost, or no keepalive confirmed before its deadline). */
export declare class LeaseLost extends ZkgateError {}
/** 410 lease_expired; `reason` says why. */
export declare class LeaseExpired extends LeaseLost {
  get reason(): string | undefined;
}
/** 404 lease_not_found. */
export declare class LeaseNotFound extends LeaseLost {}
/** 404 not_found. */
export declare class NotFound extends ZkgateError {}
/** 409 timeout: the wait ended first; `problem` carries the current state. */
export declare class Timeout extends ZkgateError {}
/** 409 not_held. */
export declare class NotHeld extends ZkgateError {}
/** 409 not_leader. */
export declare class NotLeader extends ZkgateError {}
/** 409 not_claimed. */
export declare class NotClaimed extends ZkgateError {}
/** 409 limit_mismatch. */
export declare class LimitMismatch extends ZkgateError {}
/** 409 count_mismatch. */
export declare class CountMismatch extends ZkgateError {}
/** 409 stale_token. */
export declare class StaleToken extends ZkgateError {}
/** 409 would_deadlock. */
export declare class WouldDeadlock extends ZkgateError {}
/** 409 deadlock: the wait was ended to break a deadlock; `problem.cycle` names it. */
export declare class Deadlock extends ZkgateError {}
/** 409 not_empty. */
export declare class NotEmpty extends ZkgateError {}
/** 401 unauthenticated. */
export declare class Unauthenticated extends ZkgateError {}
/** 403 forbidden. */
export declare class Forbidden extends ZkgateError {}
/** 405 method_not_allowed. */
export declare class MethodNotAllowed extends ZkgateError {}
/** 413 too_large. */
export declare class TooLarge extends ZkgateError {}
/** 415 unsupported_media_type. */
export declare class UnsupportedMediaType extends ZkgateError {}
/** 429 too_many; see `retryAfter`. */
export declare class TooMany extends ZkgateError {}
/** 507 queue_full: the item would pass a cap of the queues (`problem.exceeded`, `problem.max`). */
export declare class QueueFull extends ZkgateError {}
/** 503 unavailable: the gateway's ZooKeeper session is suspended; see `retryAfter`. */
export declare class Unavailable extends ZkgateError {}
/** 500 internal. */
export declare class InternalError extends ZkgateError {}
/** 409 version_mismatch: a counter's compare-and-set found another version (`problem.value`, `problem.version`). */
export declare class VersionMismatch extends ZkgateError {}
/** 409 format_mismatch: the counter's bytes are not of the format asked for (`problem.fits`). */
export declare class FormatMismatch extends ZkgateError {}
/** 409 out_of_range: an add would overflow the counter's format. */
export declare class OutOfRange extends ZkgateError {}

export declare function errorFrom(status: number, contentType: string, body: Uint8Array, retryAfter: string | null): ZkgateError;
/** Milliseconds of a duration. */
export declare function parseDuration(d: Duration): number;
/** A Go duration string for milliseconds. */
export declare function formatDuration(ms: number): string;

// ---------------------------------------------------------------------------
// The client.

export interface GatewayOptions {
  /** Default: $ZKGATE_URL, then http://127.0.0.1:8080. */
  url?: string;
  /** Sent as `Authorization: Bearer`; default $ZKGATE_TOKEN. */
  token?: string;
  /** How long to wait for an answer beyond the call's server-side wait, in ms (default 10000). */
  timeout?: number;
  /** How long (beyond the wait) to retry a call that is safe to repeat, in ms (default 10000). */
  retryFor?: number;
  /** How many times a call that could not connect is tried again, within retryFor, before Unreachable (default 3). */
  connectRetries?: number;
  /** A fetch of your own (default the global one). */
  fetch?: typeof fetch;
  /** How many items the lists ask for a page (default 1000, the most a gateway gives). */
  pageSize?: number;
  /**
   * Called for every request: the caller's W3C trace context as headers (`traceparent`, and
   * `tracestate`; any other key is ignored), so that the gateway's spans of the call join the
   * application's trace. With OpenTelemetry:
   * `traceHeaders: () => { const h = {}; propagation.inject(context.active(), h); return h; }`.
   * A traceparent not of the W3C form is not sent.
   */
  traceHeaders?: () => Record<string, string> | undefined;
}

/** The W3C trace headers of a traceHeaders hook's answer that are sent: a sane traceparent, and its tracestate. */
export declare function traceContext(given: Record<string, string> | undefined): Record<string, string>;

export interface CallOptions {
  /** Cancels the call (it rejects with the signal's reason). */
  signal?: AbortSignal;
}

export interface WaitOptions extends CallOptions {
  /** How long the gateway may wait (default "0s": try once; consume and watch: "30s"). */
  wait?: Duration;
}

export interface LeaseOptions extends CallOptions {
  /** How long the gateway keeps the lease if this client goes silent; default "15s". */
  ttl?: Duration;
  holder?: string;
  /** When the lease ends without releasing, nobody is granted what it held for this long (default: the gateway's --lock-delay). */
  lockDelay?: Duration;
  /** Called when the lease is lost. */
  onLost?: (err: LeaseLost) => void;
}

export declare class Gateway {
  constructor(options?: GatewayOptions);
  readonly url: string;
  token: string | undefined;
  timeout: number;
  retryFor: number;
  connectRetries: number;
  traceHeaders: (() => Record<string, string> | undefined) | undefined;
  /** Creates a lease and keeps it alive until it is revoked. One lease per concurrent holder. */
  lease(options?: LeaseOptions): Promise<Lease>;
  leaseInfo(id: string, options?: CallOptions): Promise<LeaseInfo>;
  /**
   * A lease made elsewhere, by its id: its calls, keepAlive() and revoke() act for it. Not kept
   * alive by this client, and no deadline counted here (Infinity; ttl 0): it ends here only when
   * the gateway says so or by revoke().
   */
  leaseById(id: string): Lease;
  /** Extends the lease `id` once. */
  keepAlive(id: string, options?: CallOptions): Promise<LeaseInfo>;
  /** Ends the lease `id`; LeaseExpired if it had ended already. */
  revokeLease(id: string, options?: CallOptions): Promise<void>;
  /** How many items the lists ask for a page. */
  pageSize: number;
  /** The live leases of every gateway, oldest first: every page, or the first `limit`. */
  leases(options?: CallOptions & { limit?: number }): Promise<LeaseInfo[]>;
  /** The primitives of a kind in use, in name order: every page, or the first `limit`; only the locks take a `prefix`. */
  list<K extends Kind>(kind: K, options?: CallOptions & { prefix?: string; limit?: number }): Promise<ListOf[K][]>;
  /** The state of a primitive and its X-Zkgate-Index; with `index` and `wait`, a blocking read. */
  state<K extends Kind>(kind: K, name: string, options?: WaitOptions & { index?: number }): Promise<{ state: StateOf[K]; index: number }>;
  /** The state now, then each time it changes. */
  watch<K extends Kind>(kind: K, name: string, options?: WaitOptions): AsyncGenerator<StateOf[K], void, undefined>;
  /** An election's state now and whenever its leader (or the leader's value) changes; changes of the line behind it are skipped. */
  observe(election: string, options?: WaitOptions): AsyncGenerator<ElectionState, void, undefined>;
  /** Whether `token` is the fencing token of a current holder of the lock. */
  fence(lock: string, token: number, options?: CallOptions): Promise<boolean>;
  ready(options?: CallOptions): Promise<boolean>;
  /** true if the barrier was down, false if already up. */
  raiseBarrier(name: string, options?: CallOptions): Promise<boolean>;
  lowerBarrier(name: string, options?: CallOptions): Promise<void>;
  /** Resolves once the barrier is down; Timeout if it is still up after `wait`. */
  waitBarrier(name: string, options?: WaitOptions): Promise<void>;
  /** A counter and its X-Zkgate-Index; with `index` and `wait`, a blocking read. */
  counter(name: string, options?: WaitOptions & { format?: CounterFormat; index?: number }): Promise<{ state: CounterState; index: number }>;
  /** Sets the counter; with `version`, a compare-and-set (VersionMismatch otherwise). */
  setCounter(name: string, value: number, options?: CallOptions & { version?: number; format?: CounterFormat }): Promise<CounterState>;
  /** Adds `delta` atomically; not retried (a lost answer leaves it unknown whether it was applied). */
  addCounter(name: string, delta: number, options?: CallOptions & { format?: CounterFormat }): Promise<CounterState>;
  deleteCounter(name: string, options?: CallOptions): Promise<void>;
  /** Adds an item; not retried (a lost answer leaves it unknown whether it was added). */
  produce(queue: string, data: string | Uint8Array, options?: CallOptions & { priority?: number; delay?: Duration; notBefore?: Date | string }): Promise<ItemInfo>;
  /** Removes and returns the next item (at most once), or null. */
  take(queue: string, options?: WaitOptions): Promise<Item | null>;
  peek(queue: string, id: string, options?: CallOptions): Promise<Item>;
  deleteQueue(queue: string, options?: CallOptions): Promise<void>;
}

export interface Lease extends AsyncDisposal {}
export declare class Lease {
  readonly gateway: Gateway;
  readonly id: string;
  readonly holder: string;
  /** The TTL in ms. */
  readonly ttl: number;
  /** The lock-delay in ms. */
  readonly lockDelay: number;
  /**
   * Until when the gateway last confirmed the lease, on performance.now()'s clock (ms): the
   * earlier of its expires_at and the end of its gateway's drain, counted from when the request
   * was sent. A keepalive goes a third of the way to it; if it comes first, the lease is lost
   * then (signal aborts) and revoked in the background.
   */
  get deadline(): number;
  /**
   * The base URL the lease's calls and keepalives go to: the gateway's, or the one that keeps
   * the lease since a handover, once an answer named it with X-Zkgate-Lease-Moved-To (and until
   * it refuses the connection or does not connect within 2s: then the gateway's again, which
   * passes them on).
   */
  get url(): string;
  /** The lease as the last keepalive returned it. */
  info: LeaseInfo;
  /** Why the lease was lost, once it was. */
  error: LeaseLost | undefined;
  /** Whether the lease was lost. */
  get lost(): boolean;
  /** Aborted, with the LeaseLost as its reason, when the lease is lost: pass it on to your own work. */
  get signal(): AbortSignal;
  /** Throws the LeaseLost that ended the lease, if it ended. */
  check(): void;
  keepAlive(options?: CallOptions): Promise<LeaseInfo>;
  /** Stops the keepalive and revokes the lease; throws the LeaseLost if it was lost. */
  revoke(): Promise<void>;
  /**
   * AlreadyHeld while this lease holds or acquires the lock in that mode: one lease is one holder.
   * A grant (of lock, semaphore, campaign, lead, enter, claim) answered as or after the lease is
   * lost (check() reads the clock) throws the LeaseLost instead: it ends with the lease at the
   * gateway, so there is nothing to release.
   */
  lock(name: string, options?: WaitOptions & { mode?: LockMode }): Promise<Grant>;
  /** Every lock of the set, all or nothing, taken in one order (by name); none held if one cannot be had. */
  lockAll(locks: Array<string | { name: string; mode?: LockMode }>, options?: WaitOptions): Promise<LockSet>;
  releaseAll(locks: Array<string | { name: string; mode?: LockMode }>, options?: CallOptions): Promise<void>;
  semaphore(name: string, limit: number, options?: WaitOptions): Promise<Grant>;
  release(kind: "lock" | "semaphore", name: string, options?: CallOptions & { mode?: LockMode }): Promise<void>;
  campaign(name: string, options?: WaitOptions & { value?: string }): Promise<Campaign>;
  proclaim(name: string, value: string, options?: CallOptions): Promise<CampaignInfo>;
  resign(name: string, options?: CallOptions): Promise<void>;
  /** Campaigns in rounds of `round` until elected; with `wait` (Timeout) or `signal`, gives up and resigns. */
  lead(name: string, options?: CallOptions & { value?: string; round?: Duration; wait?: Duration }): Promise<Campaign>;
  enter(name: string, count: number, options?: WaitOptions & { member?: string }): Promise<Membership>;
  leave(name: string, options?: WaitOptions & { member?: string }): Promise<DoubleBarrierState>;
  join(name: string, options?: CallOptions & { member?: string; value?: string }): Promise<GroupMembership>;
  leaveGroup(name: string, options?: CallOptions & { member?: string }): Promise<void>;
  claim(queue: string, options?: WaitOptions): Promise<Claim | null>;
  ack(queue: string, id: string, options?: CallOptions): Promise<void>;
  nack(queue: string, id: string, options?: CallOptions): Promise<void>;
  /** Acks each item when the loop body ends; nacks it if the loop is left any other way. */
  consume(queue: string, options?: WaitOptions & { untilEmpty?: boolean }): AsyncGenerator<Claim, void, undefined>;
}

/** A held lock or semaphore slot. */
export interface Grant extends AsyncDisposal {}
export declare class Grant {
  readonly lease: Lease;
  readonly kind: "lock" | "semaphore";
  readonly info: LockGrantInfo | SemaphoreGrantInfo;
  readonly name: string;
  /** The fencing token. */
  readonly token: number;
  readonly node: string;
  readonly acquiredAt: string;
  readonly mode: LockMode | undefined;
  readonly limit: number | undefined;
  released: boolean;
  release(options?: CallOptions): Promise<void>;
  isCurrent(options?: CallOptions): Promise<boolean>;
}

/** Locks held together (Lease.lockAll). */
export interface LockSet extends AsyncDisposal {}
export declare class LockSet {
  readonly lease: Lease;
  readonly locks: wire.LockRequest[];
  /** The grants, in the order they were taken (by name). */
  readonly grants: Grant[];
  released: boolean;
  release(options?: CallOptions): Promise<void>;
}

export interface Campaign extends AsyncDisposal {}
export declare class Campaign {
  readonly lease: Lease;
  info: CampaignInfo;
  readonly name: string;
  readonly elected: boolean;
  readonly token: number | undefined;
  readonly position: number | undefined;
  readonly leader: Holder | undefined;
  value: string;
  resigned: boolean;
  proclaim(value: string, options?: CallOptions): Promise<void>;
  resign(options?: CallOptions): Promise<void>;
}

export interface GroupMembership extends AsyncDisposal {}
export declare class GroupMembership {
  readonly lease: Lease;
  readonly name: string;
  readonly member: string;
  readonly info: GroupInfo;
  readonly members: GroupMember[];
  left: boolean;
  leave(options?: CallOptions): Promise<void>;
}

export interface Membership extends AsyncDisposal {}
export declare class Membership {
  readonly lease: Lease;
  readonly name: string;
  readonly member: string;
  readonly wait: Duration;
  readonly info: DoubleBarrierInfo;
  readonly members: Member[];
  left: boolean;
  leave(options?: WaitOptions): Promise<void>;
}

export declare class Item {
  readonly queue: string;
  readonly id: string;
  readonly priority: number;
  readonly data: Uint8Array;
  get text(): string;
}

export declare class Claim extends Item {
  readonly lease: Lease;
  settled: boolean;
  ack(options?: CallOptions): Promise<void>;
  nack(options?: CallOptions): Promise<void>;
}
