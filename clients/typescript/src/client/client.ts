/**
 * The producer SDK: a `Client` submits dispatches to one node at a time out of several, leaves
 * it on its goodbye, its loss or a `draining` answer, and retries only what proves nothing ran
 * (`draining`, refusals before any push, a submission never written) unless the dispatch is
 * marked idempotent, as the Rust client does. Runs on the caller's thread: a producer only
 * waits, so nothing it runs can hold up a `Pong`.
 */
import { Connection, splitAddress, type TlsOptions } from "../connection.js";
import { Reader } from "../codec/bytes.js";
import { TAG_HEARTBEAT_TIMEOUT, TAG_PROGRESS } from "../codec/types.js";
import { Writer } from "../codec/bytes.js";
import { ConnectionLostError, LintelError, UnknownVariantError } from "../errors.js";
import type { Frame } from "../codec/framing.js";
import { AsyncQueue } from "./queue.js";
import { type DispatchResult, type Event, type Outcome, type RetryReason, eventOf, outcomeOf } from "./results.js";

/** What a producer lists in `Features`: the outcomes and frames it hands its caller as they come. */
export const PRODUCER_FEATURES = ["heartbeat-timeout", "role-not-granted", "progress"] as const;

export interface ClientOptions {
  /** Node addresses, `host:port`. */
  nodes: string[] | string;
  /** Shown in the node's logs; default `ts-producer-<pid>`. */
  name?: string;
  authToken?: string;
  tls?: TlsOptions;
  /** Default 5000 ms. */
  handshakeTimeoutMs?: number;
  /** Delay before dialling again after a round of nodes failed; default 100 ms doubling to 5 s. */
  backoffMinMs?: number;
  backoffMaxMs?: number;
  /** How long `status()` and `subscribe()` wait for the node's answer; default 10000 ms. */
  requestTimeoutMs?: number;
}

/** Which attempts a dispatch may retry. */
export interface RetryPolicy {
  /** Most attempts of a dispatch; default 3 (1: never retry). */
  attempts?: number;
  /** Retry `no-worker`; default false. */
  noWorker?: boolean;
  /** The dispatch may run twice: retry what may have run (lost, timed out); default false. */
  idempotent?: boolean;
  /** Give up retrying after this long; default the reply timeout, else 30 s. */
  budgetMs?: number;
}

export interface DispatchOptions {
  taskQueue?: string;
  workflowId?: string;
  ordinal?: number | bigint;
  runId?: string;
  /** Default 1. */
  attempt?: number;
  /** Advisory deadline for the worker (a Date or Unix milliseconds). */
  deadline?: Date | number;
  /** Only workers on this node label. */
  pin?: string;
  /** Workers on these labels first, in turn, then any. */
  prefer?: string[];
  /** Only workers on one of these labels. */
  require?: string[];
  /** How long to wait for an eligible worker; default none (no wait). */
  waitForWorkerMs?: number;
  /** How long the worker may take; default the node's (30 s). */
  replyTimeoutMs?: number;
  /** Header names are lowercase token characters; a name may repeat (pass pairs). */
  headers?: Record<string, string> | [string, string][];
  /** W3C trace context, sent as the `traceparent` (and `tracestate`) header. */
  traceparent?: string;
  tracestate?: string;
  /** 1 (highest) to 5; default 3. */
  priority?: number;
  fairnessKey?: string;
  /** Thousandths, 1 to 1000000. */
  fairnessWeight?: number;
  /** Only workers of this deployment. */
  deployment?: string;
  /** The worker must heartbeat at least this often, or the dispatch ends `heartbeat-timeout`. */
  heartbeatTimeoutMs?: number;
  /** Receives the worker's progress details, in order, before the result. */
  onProgress?: (details: Uint8Array) => void;
  /** Aborting sends `Cancel` and rejects the dispatch with the signal's reason. */
  signal?: AbortSignal;
  /** Default `{attempts: 3}`; `false` never retries. */
  retry?: RetryPolicy | false;
}

interface Pending {
  resolve: (r: { outcome: Outcome; servedBy: string | null }) => void;
  reject: (e: unknown) => void;
  onProgress?: (details: Uint8Array) => void;
}

interface SubscriptionState {
  queue: AsyncQueue<Event>;
}

const encoder = new TextEncoder();
const TOKEN = /^[a-z0-9!#$%&'*+\-.^_`|~]+$/;

/** One connection to a node and what is in flight on it. */
class Link {
  readonly pending = new Map<number, Pending>();
  readonly subscriptions = new Map<number, SubscriptionState>();
  readonly queries = new Map<number, { resolve: (status: unknown) => void; reject: (e: unknown) => void }>();
  private next = 1;
  draining = false;
  /** Replaced after a `draining` answer: says goodbye once nothing is pending on it. */
  private retiring = false;

  constructor(readonly conn: Connection) {
    conn.onFrame = (f) => this.onFrame(f);
    conn.onUnknownVariant = (body, err) => this.onUnknownVariant(body, err);
    conn.onClose = (err) => this.onClose(err);
  }

  get usable(): boolean {
    return !this.conn.isClosed && !this.draining;
  }

  /**
   * No new work goes here: the node still answers what is pending while it drains, so the
   * connection stays until that has ended, then says goodbye.
   */
  retire(): void {
    this.retiring = true;
    this.settled();
  }

  /** Something pending ended: a retiring link with nothing left says goodbye. */
  settled(): void {
    if (this.retiring && this.pending.size === 0 && this.queries.size === 0 && this.subscriptions.size === 0) {
      this.conn.goodbye("draining");
    }
  }

  correlation(): number {
    // Unique among what is in flight; wraps long before 2^53.
    for (;;) {
      const c = this.next;
      this.next = this.next >= 2 ** 52 ? 1 : this.next + 1;
      if (!this.pending.has(c) && !this.subscriptions.has(c) && !this.queries.has(c)) return c;
    }
  }

  private onFrame(frame: Frame): void {
    const b = frame.body;
    switch (frame.name) {
      case "Outcome":
      case "ServedOutcome": {
        const p = this.pending.get(b.correlation);
        if (!p) return;
        this.pending.delete(b.correlation);
        try {
          p.resolve({ outcome: outcomeOf(b.result), servedBy: b.served_by ?? null });
        } catch (err) {
          p.reject(err);
        }
        this.settled();
        return;
      }
      case "Progress":
        this.pending.get(b.correlation)?.onProgress?.(b.details);
        return;
      case "Event": {
        const s = this.subscriptions.get(b.correlation);
        if (s && !s.queue.push(eventOf(b))) {
          // The caller does not read: end the subscription rather than hold without bound.
          this.subscriptions.delete(b.correlation);
          this.conn.send({ name: "Cancel", body: { correlation: b.correlation } });
          s.queue.end(new LintelError("closed", "subscription dropped: its reader fell 4096 events behind"));
          this.settled();
        }
        return;
      }
      case "SubscriptionEnded": {
        const s = this.subscriptions.get(b.correlation);
        if (!s) return;
        this.subscriptions.delete(b.correlation);
        if (b.code === "Cancelled") s.queue.end();
        else s.queue.end(new LintelError("refused", `subscription ended ${b.code}: ${b.reason}`));
        this.settled();
        return;
      }
      case "StatusDocument":
      case "Status":
      case "ClusterStatus": {
        const q = this.queries.get(b.correlation);
        if (!q) return;
        this.queries.delete(b.correlation);
        try {
          q.resolve(frame.name === "StatusDocument" ? JSON.parse(new TextDecoder().decode(b.json)) : b.status);
        } catch (err) {
          q.reject(new LintelError("malformed", `status document is not JSON: ${String(err)}`));
        }
        this.settled();
        return;
      }
      case "Goodbye":
        this.conn.destroy(new ConnectionLostError(`${this.conn.address} said goodbye: ${b.reason}`, true));
        return;
      default:
        return;
    }
  }

  /** A result of a variant this SDK does not know: that dispatch rejects with the typed error; the connection stays. */
  private onUnknownVariant(body: Uint8Array, err: UnknownVariantError): void {
    try {
      const r = new Reader(body, 0);
      const kind = r.small("u32");
      if (kind !== 10 && kind !== 24) return;
      const correlation = r.u64();
      const p = this.pending.get(correlation as number);
      if (p) {
        this.pending.delete(correlation as number);
        p.reject(err);
        this.settled();
      }
    } catch {
      // Not even the correlation reads: nothing to settle.
    }
  }

  private onClose(err: LintelError): void {
    // The cause (a truncated or oversize frame, the node's Error) stays readable as `cause`.
    const lost = err instanceof ConnectionLostError ? err : new ConnectionLostError(`${this.conn.address}: ${err.message}`, true, err);
    for (const p of this.pending.values()) p.reject(new ConnectionLostError(lost.message, true, err));
    this.pending.clear();
    // Closed by its owner: subscriptions simply end; lost: they end with the error.
    for (const s of this.subscriptions.values()) s.queue.end(err.code === "closed" ? undefined : lost);
    this.subscriptions.clear();
    for (const q of this.queries.values()) q.reject(lost);
    this.queries.clear();
  }
}

/** A live subscription: iterate it for events; `close()` cancels it. */
export interface Subscription extends AsyncIterable<Event> {
  close(): void;
}

/** A dispatch whose progress is read as an async iterator while its result is awaited. */
export interface Watched {
  progress: AsyncIterable<Uint8Array>;
  result: Promise<DispatchResult>;
}

export class Client {
  private link: Link | null = null;
  /** Links left after a `draining` answer, open until what is pending on them ends. */
  private readonly retiring = new Set<Link>();
  private connecting: Promise<Link> | null = null;
  private readonly nodes: string[];
  private rotation = 0;
  private failures = 0;
  private notBefore = 0;
  private closed = false;

  private constructor(private readonly options: ClientOptions) {
    this.nodes = Array.isArray(options.nodes) ? options.nodes : [options.nodes];
    if (this.nodes.length === 0) throw new LintelError("invalid", "a client needs one node address at least");
    for (const address of this.nodes) splitAddress(address);
    for (const [name, v] of Object.entries({ handshakeTimeoutMs: options.handshakeTimeoutMs, backoffMinMs: options.backoffMinMs, backoffMaxMs: options.backoffMaxMs, requestTimeoutMs: options.requestTimeoutMs })) {
      if (v !== undefined && !(Number.isFinite(v) && v >= 0)) throw new LintelError("invalid", `${name} is a number of milliseconds, not ${String(v)}`);
    }
  }

  /** Connects to the first node of `options.nodes` that answers. Rejects with `unreachable` when none does. */
  static async connect(options: ClientOptions): Promise<Client> {
    const client = new Client(options);
    await client.usable();
    return client;
  }

  /** True while the client holds an open connection to a node that is not draining. */
  get connected(): boolean {
    return this.link?.usable ?? false;
  }

  /** The node in use, if connected. */
  get welcome() {
    return this.link?.conn.welcome ?? null;
  }

  /** A link that is open and not draining: the current one, else a new one (the one left tried last). */
  private async usable(): Promise<Link> {
    if (this.closed) throw new LintelError("closed", "client closed");
    if (this.link?.usable) return this.link;
    if (this.connecting) return this.connecting;
    this.connecting = this.dial().finally(() => (this.connecting = null));
    return this.connecting;
  }

  private async dial(): Promise<Link> {
    const wait = this.notBefore - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const left = this.link?.conn.address;
    const start = this.rotation++ % this.nodes.length;
    let order = [...this.nodes.slice(start), ...this.nodes.slice(0, start)];
    if (left !== undefined && order.length > 1) order = [...order.filter((a) => a !== left), left];
    const errors: string[] = [];
    for (const address of order) {
      try {
        const conn = await Connection.open({
          address,
          role: "Producer",
          name: this.options.name ?? `ts-producer-${process.pid}`,
          authToken: this.options.authToken,
          tls: this.options.tls,
          features: PRODUCER_FEATURES,
          handshakeTimeoutMs: this.options.handshakeTimeoutMs,
        });
        if (this.closed) {
          conn.goodbye("client closed");
          throw new LintelError("closed", "client closed");
        }
        const old = this.link;
        this.link = new Link(conn);
        if (old && !old.conn.isClosed) {
          this.retiring.add(old);
          const onClose = old.conn.onClose;
          old.conn.onClose = (err) => {
            this.retiring.delete(old);
            onClose(err);
          };
          old.retire();
        }
        this.failures = 0;
        this.notBefore = 0;
        return this.link;
      } catch (err) {
        if (err instanceof LintelError && err.code === "closed") throw err;
        errors.push(`${address}: ${(err as Error).message}`);
      }
    }
    const min = this.options.backoffMinMs ?? 100;
    const max = this.options.backoffMaxMs ?? 5000;
    this.notBefore = Date.now() + Math.min(max, min * 2 ** Math.min(this.failures++, 16));
    throw new LintelError("unreachable", `no node could be reached: ${errors.join("; ")}`);
  }

  /**
   * Dispatches `activity` in `namespace` with `input` (bytes, or a string sent as UTF-8) and
   * resolves with its result, retrying as `options.retry` allows. Rejects with
   * `ConnectionLostError` (`mayHaveRun` says whether it may have run), `unreachable`, `invalid`,
   * `UnknownVariantError`, or the signal's reason when aborted.
   */
  async dispatch(namespace: string, activity: string, input: Uint8Array | string = new Uint8Array(0), options: DispatchOptions = {}): Promise<DispatchResult> {
    const bytes = typeof input === "string" ? encoder.encode(input) : input;
    const policy = options.retry === false ? { attempts: 1 } : (options.retry ?? {});
    const attempts = Math.max(1, policy.attempts ?? 3);
    const unsentAttempts = attempts === 1 ? 1 : Math.max(64, attempts);
    const budget = policy.budgetMs ?? options.replyTimeoutMs ?? 30000;
    const start = Date.now();
    const retried: DispatchResult["retried"] = [];
    const may = (reason: RetryReason) => {
      const limit = reason === "not-sent" || reason === "unreachable" ? (this.nodes.length > 1 ? unsentAttempts : 1) : attempts;
      return retried.length + 1 < limit && Date.now() - start < budget;
    };
    for (;;) {
      options.signal?.throwIfAborted();
      let link: Link;
      try {
        link = await this.usable();
      } catch (err) {
        if (err instanceof LintelError && err.code === "unreachable" && may("unreachable")) {
          retried.push({ node: null, reason: "unreachable" });
          continue;
        }
        throw err;
      }
      let answer: { outcome: Outcome; servedBy: string | null };
      try {
        answer = await this.attempt(link, namespace, activity, bytes, options);
      } catch (err) {
        if (err instanceof ConnectionLostError) {
          const reason: RetryReason | null = !err.mayHaveRun ? "not-sent" : policy.idempotent ? "may-have-run" : null;
          if (reason && may(reason)) {
            retried.push({ node: link.conn.address, reason });
            continue;
          }
        }
        throw err;
      }
      const o = answer.outcome;
      if (o.kind === "draining") link.draining = true;
      const reason = retryReason(o, policy);
      if (reason && may(reason)) {
        retried.push({ node: link.conn.address, reason });
        continue;
      }
      return { ...o, servedBy: answer.servedBy, node: link.conn.address, retried };
    }
  }

  /** As `dispatch`, its progress details read as an async iterator (which ends with the result). */
  watch(namespace: string, activity: string, input: Uint8Array | string = new Uint8Array(0), options: DispatchOptions = {}): Watched {
    const progress = new AsyncQueue<Uint8Array>(4096);
    const result = this.dispatch(namespace, activity, input, {
      ...options,
      onProgress: (d) => {
        options.onProgress?.(d);
        progress.push(d);
      },
    });
    result.then(
      () => progress.end(),
      () => progress.end(),
    );
    return { progress, result };
  }

  private attempt(link: Link, namespace: string, activity: string, input: Uint8Array, o: DispatchOptions): Promise<{ outcome: Outcome; servedBy: string | null }> {
    const conn = link.conn;
    const w = conn.welcome;
    const limit = w.limits.max_frame_len - 16384;
    if (input.length > limit) throw new LintelError("invalid", `input of ${input.length} bytes is over the node's ${limit}`);
    const headers: { name: string; value: string }[] = [];
    const add = (name: string, value: string) => {
      if (!TOKEN.test(name) || name.length > w.limits.max_name_len) throw new LintelError("invalid", `header name ${JSON.stringify(name)} is not lowercase token characters`);
      headers.push({ name, value: String(value) });
    };
    if (Array.isArray(o.headers)) for (const [n, v] of o.headers) add(n, v);
    else if (o.headers) for (const [n, v] of Object.entries(o.headers)) add(n, v);
    if (o.traceparent !== undefined) add("traceparent", o.traceparent);
    if (o.tracestate !== undefined) add("tracestate", o.tracestate);
    if (w.header_limits && headers.length > w.header_limits.max_headers) {
      throw new LintelError("invalid", `${headers.length} headers, the node takes ${w.header_limits.max_headers}`);
    }
    const extensions: { tag: number; critical: boolean; value: Uint8Array }[] = [];
    if (o.heartbeatTimeoutMs !== undefined) {
      const v = new Writer(10);
      v.u64(o.heartbeatTimeoutMs);
      extensions.push({ tag: TAG_HEARTBEAT_TIMEOUT, critical: true, value: v.finish().slice() });
    }
    if (o.onProgress) extensions.push({ tag: TAG_PROGRESS, critical: false, value: new Uint8Array(0) });
    const request = {
      namespace,
      task_queue: o.taskQueue ?? "",
      activity_type: activity,
      node: null,
      workflow_id: o.workflowId ?? "",
      ordinal: o.ordinal ?? 0,
      run_id: o.runId ?? null,
      attempt: o.attempt ?? 1,
      input,
      deadline_unix_ms: o.deadline === undefined ? null : typeof o.deadline === "number" ? o.deadline : o.deadline.getTime(),
    };
    const routing = o.pin !== undefined ? { Pin: o.pin } : o.prefer ? { Prefer: o.prefer } : o.require ? { Require: o.require } : "Any";
    const extras = {
      headers,
      priority: o.priority ?? null,
      fairness_key: o.fairnessKey ?? null,
      fairness_weight: o.fairnessWeight ?? null,
      deployment: o.deployment ?? null,
      extensions,
    };
    const plain = headers.length === 0 && extensions.length === 0 && o.priority === undefined && o.fairnessKey === undefined && o.fairnessWeight === undefined && o.deployment === undefined;
    if (w.version < 3 && !plain) throw new LintelError("invalid", `node speaks version ${w.version}: no headers, scheduling, deployment or heartbeat`);
    const correlation = link.correlation();
    const wait = o.waitForWorkerMs ?? null;
    const reply = o.replyTimeoutMs ?? null;
    const frame: Frame =
      w.version >= 3
        ? { name: "Submit3", body: { correlation, request, extras, wait_for_worker_ms: wait, reply_timeout_ms: reply, routing } }
        : { name: "Submit", body: { correlation, request, wait_for_worker_ms: wait, reply_timeout_ms: reply, routing } };
    return new Promise((resolve, reject) => {
      const signal = o.signal;
      const onAbort = () => {
        if (link.pending.delete(correlation)) conn.send({ name: "Cancel", body: { correlation } });
        reject(signal!.reason);
        link.settled();
      };
      link.pending.set(correlation, {
        resolve: (a) => {
          signal?.removeEventListener("abort", onAbort);
          resolve(a);
        },
        reject: (e) => {
          signal?.removeEventListener("abort", onAbort);
          reject(e);
        },
        onProgress: o.onProgress,
      });
      signal?.addEventListener("abort", onAbort, { once: true });
      let sent: boolean;
      try {
        sent = conn.send(frame);
      } catch (err) {
        link.pending.delete(correlation);
        signal?.removeEventListener("abort", onAbort);
        reject(err);
        return;
      }
      if (!sent) {
        link.pending.delete(correlation);
        signal?.removeEventListener("abort", onAbort);
        reject(new ConnectionLostError(`${conn.address} closed before the submission was written`, false));
      }
    });
  }

  /**
   * Subscribes to the node's events (`workers`, `peers`; none: every topic). Resolves once the
   * node has read the subscription (a status query answered after it), so every event after
   * that reaches the iterator.
   */
  async subscribe(topics: ("workers" | "peers")[] = []): Promise<Subscription> {
    const link = await this.usable();
    const correlation = link.correlation();
    const queue = new AsyncQueue<Event>(4096, () => {
      if (link.subscriptions.delete(correlation)) link.conn.send({ name: "Cancel", body: { correlation } });
      link.settled();
    });
    link.subscriptions.set(correlation, { queue });
    link.conn.send({ name: "Subscribe", body: { correlation, topics: topics.map((t) => (t === "workers" ? "Workers" : "Peers")) } });
    try {
      await this.query(link);
    } catch (err) {
      void queue.return();
      throw err;
    }
    return {
      [Symbol.asyncIterator]: () => queue,
      close: () => void queue.return(),
    };
  }

  /** The node's status: its status document (version 3 on), else its status report. */
  async status(): Promise<unknown> {
    return this.query(await this.usable());
  }

  /** A status query on `link`; rejects with `timeout` when the node does not answer in `requestTimeoutMs`. */
  private query(link: Link): Promise<unknown> {
    const correlation = link.correlation();
    const ms = this.options.requestTimeoutMs ?? 10000;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        if (!link.queries.delete(correlation)) return;
        reject(new LintelError("timeout", `${link.conn.address} did not answer a status query within ${ms} ms`));
        link.settled();
      }, ms);
      const done = () => clearTimeout(timer);
      link.queries.set(correlation, {
        resolve: (v) => {
          done();
          resolve(v);
        },
        reject: (e) => {
          done();
          reject(e);
        },
      });
      if (!link.conn.send({ name: "StatusQuery", body: { correlation } })) {
        link.queries.delete(correlation);
        done();
        reject(new ConnectionLostError(`${link.conn.address} closed`, false));
      }
    });
  }

  /** Says `Goodbye` and closes; dispatches in flight reject with `ConnectionLostError`. */
  close(): void {
    this.closed = true;
    this.link?.conn.goodbye("client closed");
    for (const old of this.retiring) old.conn.goodbye("client closed");
    this.retiring.clear();
  }
}

function retryReason(o: Outcome, policy: RetryPolicy): RetryReason | null {
  switch (o.kind) {
    case "draining":
      return "draining";
    case "refused":
      return ["WorkerBackpressure", "TooManyInFlight", "FairnessCapReached", "Unsupported"].includes(o.reason) ? "refused" : null;
    case "no-worker":
      return policy.noWorker ? "no-worker" : null;
    case "worker-lost":
    case "timeout":
    case "heartbeat-timeout":
    case "peer-lost":
    case "shut-down":
      return policy.idempotent ? "may-have-run" : null;
    default:
      return null;
  }
}
