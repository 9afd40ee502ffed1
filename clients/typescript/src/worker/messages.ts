/**
 * The messages between a worker's main thread (handlers) and its connection thread, both
 * ways through one MessagePort, in batches: a burst of pushes is one message, and so is a
 * burst of results.
 */
import type { TlsOptions } from "../connection.js";

/** What the connection thread needs to register: plain data, cloned into the thread. */
export interface IoConfig {
  nodes: string[];
  namespaces: string[];
  taskQueue: string;
  label: string | null;
  activities: string[];
  identity: string;
  concurrency: number;
  deployment: string | null;
  instanceId: string | null;
  name: string;
  authToken?: string;
  tls?: TlsOptions;
  handshakeTimeoutMs: number;
  backoffMinMs: number;
  backoffMaxMs: number;
}

/** A push as the main thread sees it: the request, its extras and the job id the answer names. */
export interface PushItem {
  job: number;
  request: Record<string, any>;
  extras: Record<string, any> | null;
}

export type Outcome = { Success: Uint8Array } | { Failure: { message: string; retryable: boolean } };

export type ToIo =
  | { t: "results"; items: { job: number; outcome: Outcome }[] }
  | { t: "progress"; job: number; details: Uint8Array }
  /** `graceMs` null: wait for in-flight work however long it takes. */
  | { t: "drain"; graceMs: number | null }
  | { t: "stop"; reason: string };

export type FromIo =
  | { t: "pushes"; items: PushItem[] }
  | { t: "cancel"; jobs: number[]; reason: string }
  | { t: "registered"; workerId: number | string; nodeId: string; address: string; resumed: boolean }
  | { t: "disconnected"; reason: string }
  | { t: "drained"; completed: number }
  | { t: "stopped"; reason: string; error?: { code: string; message: string; refusal?: string; refusalReason?: string } };
