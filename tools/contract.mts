// The contract holds for the Node client: the JSON it sends and reads, as
// client/node/index.d.ts declares it (and index.js is checked against that
// declaration), must agree with the types openapi-typescript generates from
// openapi.yaml. `tsc --noEmit -p tools` compiles this file; it is never run.
// A change of the contract that the client does not follow breaks the build.

import type { paths } from "./gen/openapi.js";
import * as zk from "../client/node/index.js";

type Schemas = import("./gen/openapi.js").components["schemas"];
type Method = "get" | "put" | "post" | "delete";
type Op<P extends keyof paths, M extends Method> = NonNullable<paths[P][M]>;

/** The JSON body of an answer. */
type Answer<P extends keyof paths, M extends Method, S extends number> =
  Op<P, M> extends { responses: infer R }
    ? S extends keyof R
      ? R[S] extends { content: { "application/json": infer B } } ? B : ["no JSON answer", P, M, S]
      : ["no such status", P, M, S]
    : never;

/** The JSON body of a request. */
type Request<P extends keyof paths, M extends Method> =
  NonNullable<Op<P, M>["requestBody"]> extends { content: { "application/json": infer B } } ? B : ["no JSON body", P, M];

/** The query parameters of an operation. */
type Query<P extends keyof paths, M extends Method> = keyof NonNullable<NonNullable<Op<P, M>["parameters"]>["query"]>;

// `Fits<A, B>` compiles only if A is assignable to B.
type Fits<A extends B, B> = [A, B];
// `Known<C, S>` compiles only if every field the client declares is one the contract names.
type Known<C, S> = Exclude<keyof C, keyof S> extends never ? true : { "client fields not in the contract": Exclude<keyof C, keyof S> };
type Yes<T extends true> = T;
// `Sends<C, S>` compiles only if the body C the client sends fits the body S
// the contract takes, with no field S lacks.
type Sends<C extends S & { [K in Exclude<keyof C, keyof S>]: "a client field not in the contract" }, S> = [C, S];
// `Takes<P, M, Q>` compiles only if the operation takes each query parameter the client sends.
type Takes<P extends keyof paths, M extends Method, Q extends Query<P, M>> = [P, M, Q];

// What the gateway answers fits what the client reads, and the client reads no field the contract lacks.
export type Answers = [
  Fits<Answer<"/v1/leases", "post", 201>, zk.LeaseInfo>,
  Fits<Answer<"/v1/leases/{id}", "get", 200>, zk.LeaseInfo>,
  Fits<Answer<"/v1/leases/{id}/keepalive", "post", 200>, zk.LeaseInfo>,
  Fits<Answer<"/v1/leases", "get", 200>, { leases: zk.LeaseInfo[]; next?: string }>,
  Fits<Answer<"/v1/locks", "get", 200>, { locks: zk.ListOf["locks"][]; next?: string }>,
  Fits<Answer<"/v1/semaphores", "get", 200>, { semaphores: zk.ListOf["semaphores"][]; next?: string }>,
  Fits<Answer<"/v1/elections", "get", 200>, { elections: zk.ListOf["elections"][]; next?: string }>,
  Fits<Answer<"/v1/barriers", "get", 200>, { barriers: zk.ListOf["barriers"][]; next?: string }>,
  Fits<Answer<"/v1/double-barriers", "get", 200>, { double_barriers: zk.ListOf["double-barriers"][]; next?: string }>,
  Fits<Answer<"/v1/queues", "get", 200>, { queues: zk.ListOf["queues"][]; next?: string }>,
  Fits<Answer<"/v1/groups", "get", 200>, { groups: zk.ListOf["groups"][]; next?: string }>,
  Fits<Answer<"/v1/groups/{name}", "get", 200>, zk.StateOf["groups"]>,
  Fits<Answer<"/v1/groups/{name}/join", "post", 200>, zk.GroupInfo>,
  Fits<Answer<"/v1/locks/{name}/acquire", "post", 200>, zk.LockGrantInfo>,
  Fits<Answer<"/v1/semaphores/{name}/acquire", "post", 200>, zk.SemaphoreGrantInfo>,
  Fits<Answer<"/v1/elections/{name}/campaign", "post", 200>, zk.CampaignInfo>,
  Fits<Answer<"/v1/elections/{name}/campaign", "post", 202>, zk.CampaignInfo>,
  Fits<Answer<"/v1/elections/{name}/value", "put", 200>, zk.CampaignInfo>,
  Fits<Answer<"/v1/double-barriers/{name}/enter", "post", 200>, zk.DoubleBarrierInfo>,
  Fits<Answer<"/v1/double-barriers/{name}/leave", "post", 200>, zk.DoubleBarrierState>,
  Fits<Answer<"/v1/queues/{name}/items", "post", 201>, zk.ItemInfo>,
  Fits<Answer<"/v1/locks/{name}", "get", 200>, zk.StateOf["locks"]>,
  Fits<Answer<"/v1/semaphores/{name}", "get", 200>, zk.StateOf["semaphores"]>,
  Fits<Answer<"/v1/elections/{name}", "get", 200>, zk.StateOf["elections"]>,
  Fits<Answer<"/v1/barriers/{name}", "get", 200>, zk.StateOf["barriers"]>,
  Fits<Answer<"/v1/barriers/{name}", "put", 200>, zk.BarrierState>,
  Fits<Answer<"/v1/barriers/{name}", "put", 201>, zk.BarrierState>,
  Fits<Answer<"/v1/barriers/{name}/wait", "post", 200>, zk.BarrierState>,
  Fits<Answer<"/v1/double-barriers/{name}", "get", 200>, zk.StateOf["double-barriers"]>,
  Fits<Answer<"/v1/queues/{name}", "get", 200>, zk.StateOf["queues"]>,
  Fits<Schemas["Problem"], zk.Problem>,
  // Counters.
  Fits<Answer<"/v1/counters", "get", 200>, { counters: zk.ListOf["counters"][]; next?: string }>,
  Fits<Answer<"/v1/counters/{name}", "get", 200>, zk.StateOf["counters"]>,
  Fits<Answer<"/v1/counters/{name}", "put", 200>, zk.CounterState>,
  Fits<Answer<"/v1/counters/{name}/add", "post", 200>, zk.CounterState>,
  Fits<Answer<"/v1/locks/{name}/acquire", "post", 200>["token"], zk.Grant["token"]>,
];

export type KnownFields = [
  Yes<Known<zk.LeaseInfo, Schemas["Lease"]>>,
  Yes<Known<zk.Hold, Schemas["Hold"]>>,
  Yes<Known<zk.Holder, Schemas["Holder"]>>,
  Yes<Known<zk.Member, Schemas["Member"]>>,
  Yes<Known<zk.LockGrantInfo, Schemas["LockGrant"]>>,
  Yes<Known<zk.SemaphoreGrantInfo, Schemas["SemaphoreGrant"]>>,
  Yes<Known<zk.CampaignInfo, Schemas["Campaign"]>>,
  Yes<Known<zk.DoubleBarrierInfo, Schemas["DoubleBarrierEntered"]>>,
  Yes<Known<zk.DoubleBarrierState, Schemas["DoubleBarrierState"]>>,
  Yes<Known<zk.ItemInfo, Schemas["Item"]>>,
  Yes<Known<zk.LockState, Schemas["LockState"]>>,
  Yes<Known<zk.SemaphoreState, Schemas["SemaphoreState"]>>,
  Yes<Known<zk.ElectionState, Schemas["ElectionState"]>>,
  Yes<Known<zk.BarrierState, Schemas["Barrier"]>>,
  Yes<Known<zk.QueueState, Schemas["QueueState"]>>,
  Yes<Known<zk.Problem, Schemas["Problem"]>>,
  Yes<Known<zk.LockSummary, Schemas["LockSummary"]>>,
  Yes<Known<zk.ElectionSummary, Schemas["ElectionSummary"]>>,
  Yes<Known<zk.GroupMember, Schemas["GroupMember"]>>,
  Yes<Known<zk.GroupState, Schemas["GroupState"]>>,
  Yes<Known<zk.GroupInfo, Schemas["GroupJoined"]>>,
  Yes<Known<zk.CounterState, Schemas["Counter"]>>,
  Yes<Known<zk.CounterSummary, Schemas["CounterSummary"]>>,
];

// What the client sends is what the contract takes (the contract refuses unknown fields).
export type Requests = [
  Sends<zk.wire.LeaseRequest, Request<"/v1/leases", "post">>,
  Sends<zk.wire.LockAcquireRequest, Request<"/v1/locks/{name}/acquire", "post">>,
  Sends<zk.wire.LockReleaseRequest, Request<"/v1/locks/{name}/release", "post">>,
  Sends<zk.wire.LockSetAcquireRequest, Request<"/v1/locks/acquire", "post">>,
  Sends<zk.wire.LockSetReleaseRequest, Request<"/v1/locks/release", "post">>,
  Sends<zk.wire.SemaphoreAcquireRequest, Request<"/v1/semaphores/{name}/acquire", "post">>,
  Sends<zk.wire.LeaseOnlyRequest, Request<"/v1/semaphores/{name}/release", "post">>,
  Sends<zk.wire.CampaignRequest, Request<"/v1/elections/{name}/campaign", "post">>,
  Sends<zk.wire.ProclaimRequest, Request<"/v1/elections/{name}/value", "put">>,
  Sends<zk.wire.LeaseOnlyRequest, Request<"/v1/elections/{name}/resign", "post">>,
  Sends<zk.wire.EnterRequest, Request<"/v1/double-barriers/{name}/enter", "post">>,
  Sends<zk.wire.LeaveRequest, Request<"/v1/double-barriers/{name}/leave", "post">>,
  Sends<zk.wire.LeaseOnlyRequest, Request<"/v1/queues/{name}/claim", "post">>,
  Sends<zk.wire.LeaseOnlyRequest, Request<"/v1/queues/{name}/items/{id}/ack", "post">>,
  Sends<zk.wire.LeaseOnlyRequest, Request<"/v1/queues/{name}/items/{id}/nack", "post">>,
  Sends<zk.wire.JoinRequest, Request<"/v1/groups/{name}/join", "post">>,
  Sends<zk.wire.GroupLeaveRequest, Request<"/v1/groups/{name}/leave", "post">>,
  Sends<zk.wire.CounterSetRequest, Request<"/v1/counters/{name}", "put">>,
  Sends<zk.wire.CounterAddRequest, Request<"/v1/counters/{name}/add", "post">>,
];

// The query parameters the client sends, and the routes it calls without a body.
export type Queries = [
  Takes<"/v1/locks/{name}/acquire", "post", "wait">,
  Takes<"/v1/locks/acquire", "post", "wait">,
  Takes<"/v1/semaphores/{name}/acquire", "post", "wait">,
  Takes<"/v1/elections/{name}/campaign", "post", "wait">,
  Takes<"/v1/double-barriers/{name}/enter", "post", "wait">,
  Takes<"/v1/double-barriers/{name}/leave", "post", "wait">,
  Takes<"/v1/barriers/{name}/wait", "post", "wait">,
  Takes<"/v1/queues/{name}/claim", "post", "wait">,
  Takes<"/v1/queues/{name}/take", "post", "wait">,
  Takes<"/v1/queues/{name}/items", "post", "priority">,
  Takes<"/v1/locks/{name}/fence", "get", "token">,
  Takes<"/v1/locks/{name}", "get", "index" | "wait">,
  Takes<"/v1/semaphores/{name}", "get", "index" | "wait">,
  Takes<"/v1/elections/{name}", "get", "index" | "wait">,
  Takes<"/v1/barriers/{name}", "get", "index" | "wait">,
  Takes<"/v1/double-barriers/{name}", "get", "index" | "wait">,
  Takes<"/v1/queues/{name}", "get", "index" | "wait">,
  Takes<"/v1/groups/{name}", "get", "index" | "wait">,
  Takes<"/v1/leases", "get", "limit" | "after">,
  Takes<"/v1/locks", "get", "prefix" | "limit" | "after">,
  Takes<"/v1/semaphores", "get", "limit" | "after">,
  Takes<"/v1/elections", "get", "limit" | "after">,
  Takes<"/v1/barriers", "get", "limit" | "after">,
  Takes<"/v1/double-barriers", "get", "limit" | "after">,
  Takes<"/v1/queues", "get", "limit" | "after">,
  Takes<"/v1/groups", "get", "limit" | "after">,
  Op<"/v1/leases/{id}", "delete">,
  Op<"/v1/barriers/{name}", "delete">,
  Op<"/v1/queues/{name}", "delete">,
  Op<"/v1/queues/{name}/items/{id}", "get">,
  Takes<"/v1/counters/{name}", "get", "format" | "index" | "wait">,
  Takes<"/v1/counters/{name}", "put", "format">,
  Takes<"/v1/counters/{name}/add", "post", "format">,
  Takes<"/v1/counters", "get", "limit" | "after">,
  Op<"/v1/counters/{name}", "delete">,
];

// The patterns the README shows compile as written.
export async function usage(gate: zk.Gateway, signal: AbortSignal): Promise<number> {
  await using lease = await gate.lease({ ttl: "15s", holder: "billing-worker-3", lockDelay: "10s", onLost: (e: zk.LeaseLost) => console.error(e.message) });
  const deadline: number = lease.deadline;
  void deadline;
  const elsewhere: zk.Lease = gate.leaseById(lease.id);
  const kept: zk.LeaseInfo = await gate.keepAlive(elsewhere.id);
  void kept;
  await using grant = await lease.lock("invoices", { wait: "10s", signal });
  const token: number = grant.token;
  for await (const item of lease.consume("emails", { wait: "30s", signal: lease.signal, untilEmpty: true })) {
    const data: Uint8Array = item.data;
    void data;
  }
  await using leader = await lease.campaign("scheduler", { value: "10.0.0.5:8080", wait: "30s" });
  if (leader.elected) await leader.proclaim("10.0.0.5:9090");
  for await (const state of gate.observe("scheduler", { signal })) {
    const who: zk.Holder | null = state.leader;
    void who;
    break;
  }
  const { state } = await gate.state("locks", "invoices");
  try {
    await lease.semaphore("gpu", 3, { wait: "1m" });
  } catch (e) {
    if (e instanceof zk.Timeout) return e.problem.holders?.length ?? 0;
    throw e;
  }
  return token + state.holders.length;
}
