/**
 * How a dispatch ended, as a discriminated union on `kind`, one member per `DispatchResult`
 * variant of PROTOCOL.md section 4 (`NoWorker` and `NoWorker3` are one `no-worker`, its census
 * in version-3 counts).
 */
import type { U64 } from "../codec/bytes.js";

/** What the node knew when it found no eligible worker. */
export interface Census {
  reason: string;
  poolWorkers: number;
  servingActivity: number;
  compatibleWorkers: number;
  deploymentWorkers: number;
  atCapacity: number;
  draining: number;
  probation: number;
  unreachable: number;
  lastDepartureMsAgo: number | null;
}

export type ActivityOutcome =
  | { kind: "success"; output: Uint8Array; text(): string }
  | { kind: "failure"; message: string; retryable: boolean };

export type Outcome =
  | { kind: "completed"; outcome: ActivityOutcome; workflowId: string; ordinal: U64; runId: string | null }
  | { kind: "no-worker"; census: Census }
  | { kind: "worker-lost"; workerId: U64 }
  | { kind: "timeout"; workerId: U64; afterMs: number }
  | { kind: "heartbeat-timeout"; workerId: U64; afterMs: number }
  | { kind: "refused"; reason: string; detail: string }
  | { kind: "cancelled" }
  | { kind: "draining" }
  | { kind: "peer-lost"; peer: string; afterMs: number }
  | { kind: "shut-down"; afterMs: number };

/** Why an attempt was tried again. */
export type RetryReason = "draining" | "refused" | "no-worker" | "not-sent" | "unreachable" | "may-have-run";

/** A dispatch's result: its outcome, who served it and the attempts before it. */
export type DispatchResult = Outcome & {
  /** The node whose worker ran it or that decided its outcome (version 2 on). */
  servedBy: string | null;
  /** The address of the node this client submitted to. */
  node: string;
  /** The attempts before this one. */
  retried: { node: string | null; reason: RetryReason }[];
};

const decoder = new TextDecoder();

/** The wire's `DispatchResult` (serde-shaped) as an `Outcome`. */
export function outcomeOf(result: any): Outcome {
  if (result === "Cancelled") return { kind: "cancelled" };
  if (result === "Draining") return { kind: "draining" };
  const [name] = Object.keys(result) as [string];
  const v = result[name];
  switch (name) {
    case "Completed": {
      const o = v.outcome;
      const outcome: ActivityOutcome = o.Success
        ? { kind: "success", output: o.Success, text: () => decoder.decode(o.Success) }
        : { kind: "failure", message: o.Failure.message, retryable: o.Failure.retryable };
      return { kind: "completed", outcome, workflowId: v.workflow_id, ordinal: v.ordinal, runId: v.run_id };
    }
    case "NoWorker":
      return {
        kind: "no-worker",
        census: {
          reason: v.reason,
          poolWorkers: v.pool_workers,
          servingActivity: v.serving_activity,
          compatibleWorkers: v.compatible_workers,
          deploymentWorkers: v.compatible_workers,
          atCapacity: v.at_capacity,
          draining: v.excluded,
          probation: 0,
          unreachable: 0,
          lastDepartureMsAgo: v.last_departure_ms_ago === null ? null : Number(v.last_departure_ms_ago),
        },
      };
    case "NoWorker3":
      return {
        kind: "no-worker",
        census: {
          reason: v.reason,
          poolWorkers: v.pool_workers,
          servingActivity: v.serving_activity,
          compatibleWorkers: v.compatible_workers,
          deploymentWorkers: v.deployment_workers,
          atCapacity: v.at_capacity,
          draining: v.draining,
          probation: v.probation,
          unreachable: v.unreachable,
          lastDepartureMsAgo: v.last_departure_ms_ago === null ? null : Number(v.last_departure_ms_ago),
        },
      };
    case "WorkerLost":
      return { kind: "worker-lost", workerId: v.worker_id };
    case "Timeout":
      return { kind: "timeout", workerId: v.worker_id, afterMs: Number(v.after_ms) };
    case "HeartbeatTimeout":
      return { kind: "heartbeat-timeout", workerId: v.worker_id, afterMs: Number(v.after_ms) };
    case "Refused":
      return { kind: "refused", reason: v.reason, detail: v.detail };
    case "PeerLost":
      return { kind: "peer-lost", peer: v.peer, afterMs: Number(v.after_ms) };
    case "ShutDown":
      return { kind: "shut-down", afterMs: Number(v.after_ms) };
    default:
      throw new Error(`unhandled DispatchResult ${name}`);
  }
}

/** A node event, camel-cased: `kind` names the variant. */
export interface WorkerInfo {
  workerId: U64;
  identity: string;
  deployment: string | null;
  instanceId: string | null;
  channels: string[];
}

export type NodeEvent =
  | { kind: "worker-registered"; worker: WorkerInfo }
  | { kind: "worker-excluded"; worker: WorkerInfo; reason: string }
  | { kind: "worker-restored"; worker: WorkerInfo }
  | { kind: "worker-departed"; worker: WorkerInfo; reason: string }
  | { kind: "peer-up"; nodeId: string; incarnation: U64; address: string }
  | { kind: "peer-down"; nodeId: string; incarnation: U64; reason: string }
  | { kind: "missed"; count: number };

export interface Event {
  seq: U64;
  atUnixMs: number;
  event: NodeEvent;
}

function workerInfo(w: any): WorkerInfo {
  return { workerId: w.worker_id, identity: w.identity, deployment: w.deployment, instanceId: w.instance_id, channels: w.channels };
}

export function eventOf(body: any): Event {
  const [name] = Object.keys(body.event) as [string];
  const v = body.event[name];
  let event: NodeEvent;
  switch (name) {
    case "WorkerRegistered":
      event = { kind: "worker-registered", worker: workerInfo(v) };
      break;
    case "WorkerExcluded":
      event = { kind: "worker-excluded", worker: workerInfo(v.worker), reason: v.reason };
      break;
    case "WorkerRestored":
      event = { kind: "worker-restored", worker: workerInfo(v) };
      break;
    case "WorkerDeparted":
      event = { kind: "worker-departed", worker: workerInfo(v.worker), reason: v.reason };
      break;
    case "PeerUp":
      event = { kind: "peer-up", nodeId: v.node_id, incarnation: v.incarnation, address: v.address };
      break;
    case "PeerDown":
      event = { kind: "peer-down", nodeId: v.node_id, incarnation: v.incarnation, reason: v.reason };
      break;
    default:
      event = { kind: "missed", count: Number(v.count) };
  }
  return { seq: body.seq, atUnixMs: Number(body.at_unix_ms), event };
}
