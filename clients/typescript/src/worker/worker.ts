/**
 * The worker SDK's public face, on the caller's thread: it starts the connection thread
 * (io.ts), runs the handler for each push it passes, and sends results back in batches.
 * Handlers run here, where the caller's state is; the socket, pings and pongs run on the
 * connection thread, so a handler that blocks this thread delays other handlers, never a Pong.
 */
import { Worker as Thread } from "node:worker_threads";
import { EventEmitter } from "node:events";
import { splitAddress, type TlsOptions } from "../connection.js";
import { LintelError, RefusedError } from "../errors.js";
import type { FromIo, IoConfig, Outcome, PushItem, ToIo } from "./messages.js";

/** How a worker registers and runs. */
export interface WorkerOptions {
  /** Node addresses, `host:port`; tried in turn, the next on loss or drain. */
  nodes: string[] | string;
  /** Namespaces to serve (one or more). */
  namespaces: string[] | string;
  /** Activity types to serve (one or more). */
  activities: string[] | string;
  /** Default: the `default` queue. */
  taskQueue?: string;
  /** The node label dispatches pin, prefer or require; default none. */
  label?: string;
  /** Shown in the node's status and events; default `ts-worker-<pid>`. */
  identity?: string;
  /** Most requests run at once; default 1. */
  concurrency?: number;
  /** The deployment (a version of this code) it runs. */
  deployment?: string;
  /** This instance's id: a later worker of the same deployment and instance id supersedes it. */
  instanceId?: string;
  authToken?: string;
  tls?: TlsOptions;
  /** Drain on SIGTERM and SIGINT (finish in-flight work, then exit the connection). Default false. */
  drainOnSignals?: boolean;
  /** The grace of a drain given none (`drain()`, a signal's): past it in-flight work is aborted. Default none: wait for it. */
  drainGraceMs?: number;
  /** Default 5000 ms. */
  handshakeTimeoutMs?: number;
  /** Reconnect backoff bounds; default 100 ms to 5 s. */
  backoffMinMs?: number;
  backoffMaxMs?: number;
  /** The handler: its result is the `Success` bytes; a throw is a `Failure`. */
  handler: Handler;
}

/** A handler: returns the output (bytes or a string, UTF-8) or a `failure(...)`; a throw is a retryable failure. */
export type Handler = (request: Request) => Promise<Uint8Array | string | Failure> | Uint8Array | string | Failure;

/** An activity's failure, as a handler returns it. */
export class Failure {
  constructor(
    readonly message: string,
    readonly retryable = true,
  ) {}
}

/** A failed activity: `retryable` tells the caller whether another attempt may help. */
export function failure(message: string, retryable = true): Failure {
  return new Failure(message, retryable);
}

/** A header as pushed: names are lowercase; a name may repeat. */
export interface RequestHeader {
  name: string;
  value: string;
}

/** What a handler gets: the request, its headers and trace context, cancellation and heartbeats. */
export interface Request {
  namespace: string;
  taskQueue: string;
  activityType: string;
  node: string | null;
  workflowId: string;
  ordinal: number | bigint;
  runId: string | null;
  attempt: number;
  input: Uint8Array;
  /** The input as UTF-8 text. */
  text(): string;
  /** The advisory deadline, if the producer set one. */
  deadline: Date | null;
  headers: RequestHeader[];
  /** The first value of header `name` (lowercase), or undefined. */
  header(name: string): string | undefined;
  /** The W3C `traceparent` header, if any. */
  traceparent: string | undefined;
  priority: number | null;
  fairnessKey: string | null;
  deployment: string | null;
  /** Fires when the node cancels the request or its deadline passes. */
  signal: AbortSignal;
  /** Sends `Progress` (a heartbeat, with optional details of at most 4096 bytes) for this request. */
  heartbeat(details?: Uint8Array | string): void;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Worker events: `registered`, `disconnected`, `drained` (a drain is done, `{completed}`), `error`. */
export class Worker extends EventEmitter {
  private readonly thread: Thread;
  private readonly handler: Handler;
  private readonly running = new Map<number, AbortController>();
  private results: { job: number; outcome: Outcome }[] = [];
  private flushScheduled = false;
  private readonly ready: Promise<void>;
  private readonly done: Promise<void>;
  private drainRequested = false;
  private readonly drainGraceMs: number | null;
  private stopped = false;
  private readonly signalHandler?: () => void;
  /** The worker id the node gave, once registered. */
  workerId: number | string | null = null;
  /** The node it is registered on. */
  nodeId: string | null = null;

  constructor(options: WorkerOptions) {
    super();
    const list = (v: string[] | string) => (Array.isArray(v) ? v : [v]);
    const config: IoConfig = {
      nodes: list(options.nodes),
      namespaces: list(options.namespaces),
      activities: list(options.activities),
      taskQueue: options.taskQueue ?? "",
      label: options.label ?? null,
      identity: options.identity ?? `ts-worker-${process.pid}`,
      concurrency: options.concurrency ?? 1,
      deployment: options.deployment ?? null,
      instanceId: options.instanceId ?? null,
      name: options.identity ?? `ts-worker-${process.pid}`,
      authToken: options.authToken,
      tls: options.tls,
      handshakeTimeoutMs: options.handshakeTimeoutMs ?? 5000,
      backoffMinMs: options.backoffMinMs ?? 100,
      backoffMaxMs: options.backoffMaxMs ?? 5000,
    };
    if (config.nodes.length === 0) throw new LintelError("invalid", "a worker needs one node address at least");
    if (config.namespaces.length === 0) throw new LintelError("invalid", "a worker needs one namespace at least");
    if (config.activities.length === 0) throw new LintelError("invalid", "a worker needs one activity type at least");
    if (!Number.isInteger(config.concurrency) || config.concurrency < 1) throw new LintelError("invalid", "concurrency is a positive integer");
    for (const address of config.nodes) splitAddress(address);
    if (typeof options.handler !== "function") throw new LintelError("invalid", "a worker needs a handler function");
    for (const name of ["handshakeTimeoutMs", "backoffMinMs", "backoffMaxMs"] as const) {
      const v = config[name];
      if (!(Number.isFinite(v) && v >= 0)) throw new LintelError("invalid", `${name} is a number of milliseconds, not ${String(v)}`);
    }
    this.drainGraceMs = graceOf(options.drainGraceMs, "drainGraceMs");
    this.handler = options.handler;
    this.thread = new Thread(new URL("./io.js", import.meta.url), { workerData: config });
    let registered!: () => void;
    let failed!: (e: Error) => void;
    this.ready = new Promise<void>((resolve, reject) => {
      registered = resolve;
      failed = reject;
    });
    this.ready.catch(() => {});
    let finished!: () => void;
    this.done = new Promise<void>((resolve) => (finished = resolve));
    this.thread.on("message", (m: FromIo) => {
      switch (m.t) {
        case "pushes":
          for (const item of m.items) this.run(item);
          return;
        case "cancel":
          for (const job of m.jobs) this.running.get(job)?.abort(new LintelError("closed", m.reason));
          return;
        case "registered":
          this.workerId = m.workerId;
          this.nodeId = m.nodeId;
          this.emit("registered", { workerId: m.workerId, nodeId: m.nodeId, address: m.address, resumed: m.resumed });
          registered();
          return;
        case "disconnected":
          this.emit("disconnected", m.reason);
          return;
        case "drained":
          this.finish();
          finished();
          this.emit("drained", { completed: m.completed });
          return;
        case "stopped":
          if (m.error) {
            const e = m.error;
            const err = e.refusal !== undefined ? new RefusedError(e.refusal, e.refusalReason ?? "") : new LintelError(e.code as never, e.message);
            failed(err);
            if (this.listenerCount("error") > 0) this.emit("error", err);
          }
          this.finish();
          finished();
          return;
      }
    });
    this.thread.on("error", (err) => {
      failed(err);
      finished();
    });
    this.thread.on("exit", () => finished());
    if (options.drainOnSignals) {
      this.signalHandler = () => void this.drain();
      process.once("SIGTERM", this.signalHandler);
      process.once("SIGINT", this.signalHandler);
    }
  }

  /** Resolves once the worker is registered on a node; rejects if the node refused it. */
  registered(): Promise<void> {
    return this.ready;
  }

  /** Requests running now. */
  get inFlight(): number {
    return this.running.size;
  }

  /**
   * Takes no more work, finishes what is in flight (aborting what is left once `graceMs`, default
   * the `drainGraceMs` option, passes), says `Drained` and closes. Resolves once done.
   */
  drain(options: { graceMs?: number } = {}): Promise<void> {
    const graceMs = options.graceMs === undefined ? this.drainGraceMs : graceOf(options.graceMs, "graceMs");
    if (!this.drainRequested && !this.stopped) {
      this.drainRequested = true;
      this.send({ t: "drain", graceMs });
    }
    return this.done;
  }

  /** Says `Goodbye` and stops at once; running handlers are aborted. */
  async close(reason = "worker closed"): Promise<void> {
    if (!this.stopped) this.send({ t: "stop", reason });
    for (const c of this.running.values()) c.abort(new LintelError("closed", reason));
    await this.done;
  }

  private finish(): void {
    if (this.stopped) return;
    this.stopped = true;
    if (this.signalHandler) {
      process.off("SIGTERM", this.signalHandler);
      process.off("SIGINT", this.signalHandler);
    }
    void this.thread.terminate();
  }

  private send(m: ToIo): void {
    if (!this.stopped) this.thread.postMessage(m);
  }

  private run(item: PushItem): void {
    const controller = new AbortController();
    this.running.set(item.job, controller);
    const r = item.request;
    const x = item.extras;
    const headers: RequestHeader[] = x ? x.headers.map((h: RequestHeader) => ({ name: h.name, value: h.value })) : [];
    let deadlineTimer: NodeJS.Timeout | undefined;
    const deadline = r.deadline_unix_ms === null ? null : new Date(Number(r.deadline_unix_ms));
    if (deadline) {
      const ms = deadline.getTime() - Date.now();
      const fire = () => controller.abort(new LintelError("closed", "deadline passed"));
      if (ms <= 0) fire();
      else deadlineTimer = setTimeout(fire, Math.min(ms, 2 ** 31 - 1));
    }
    const job = item.job;
    const request: Request = {
      namespace: r.namespace,
      taskQueue: r.task_queue,
      activityType: r.activity_type,
      node: r.node,
      workflowId: r.workflow_id,
      ordinal: r.ordinal,
      runId: r.run_id,
      attempt: r.attempt,
      input: r.input,
      text: () => decoder.decode(r.input),
      deadline,
      headers,
      header: (name) => headers.find((h) => h.name === name)?.value,
      traceparent: headers.find((h) => h.name === "traceparent")?.value,
      priority: x?.priority ?? null,
      fairnessKey: x?.fairness_key ?? null,
      deployment: x?.deployment ?? null,
      signal: controller.signal,
      heartbeat: (details) => {
        const bytes = details === undefined ? new Uint8Array(0) : typeof details === "string" ? encoder.encode(details) : details;
        if (this.running.has(job)) this.send({ t: "progress", job, details: bytes });
      },
    };
    const settle = (outcome: Outcome) => {
      if (deadlineTimer) clearTimeout(deadlineTimer);
      this.running.delete(job);
      this.results.push({ job, outcome });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => this.flush());
      }
    };
    let result;
    try {
      result = this.handler(request);
    } catch (err) {
      settle(failed(err));
      return;
    }
    if (result instanceof Promise || (result !== null && typeof result === "object" && typeof (result as any).then === "function")) {
      (result as Promise<Uint8Array | string | Failure>).then(
        (v) => settle(outcomeOf(v)),
        (err) => settle(failed(err)),
      );
    } else {
      settle(outcomeOf(result as Uint8Array | string | Failure));
    }
  }

  private flush(): void {
    this.flushScheduled = false;
    if (this.results.length === 0) return;
    const items = this.results;
    this.results = [];
    this.send({ t: "results", items });
  }
}

/** A grace in milliseconds, or null for none; anything else is invalid. */
function graceOf(v: number | undefined, name: string): number | null {
  if (v === undefined) return null;
  if (!(typeof v === "number" && Number.isFinite(v) && v >= 0)) throw new LintelError("invalid", `${name} is a number of milliseconds, not ${String(v)}`);
  return v;
}

function outcomeOf(v: Uint8Array | string | Failure): Outcome {
  if (v instanceof Failure) return { Failure: { message: v.message, retryable: v.retryable } };
  if (typeof v === "string") return { Success: encoder.encode(v) };
  if (v instanceof Uint8Array) return { Success: v };
  if (v === undefined || v === null) return { Success: new Uint8Array(0) };
  return { Failure: { message: `handler returned ${typeof v}, not bytes or a string`, retryable: false } };
}

function failed(err: unknown): Outcome {
  const retryable = err !== null && typeof err === "object" && "retryable" in err ? Boolean((err as any).retryable) : true;
  const message = err instanceof Error ? err.message : String(err);
  return { Failure: { message, retryable } };
}
