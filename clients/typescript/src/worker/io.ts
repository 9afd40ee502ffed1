/**
 * A worker's connection thread: dials a node, registers (or resumes its session), answers
 * pings, and passes pushes to the main thread and results back. It never runs a handler, so a
 * handler that blocks the main thread never holds up a `Pong`: the node keeps the worker
 * eligible. Runs as a `worker_threads` Worker started by `Worker` (worker.ts).
 */
import { parentPort, workerData } from "node:worker_threads";
import { Connection } from "../connection.js";
import type { Frame } from "../codec/framing.js";
import { LintelError, RefusedError } from "../errors.js";
import type { FromIo, IoConfig, Outcome, PushItem, ToIo } from "./messages.js";

/** What a worker lists in `Features`: it answers heartbeat timeouts and resumes sessions. */
export const WORKER_FEATURES = ["heartbeat-timeout", "worker-resume"] as const;

interface Job {
  correlation: number | bigint;
  workflow_id: string;
  ordinal: number | bigint;
  run_id: string | null;
  /** The answer once the handler gave it. */
  outcome: Outcome | null;
  /** Written on the connection of this generation (0: not written). */
  sentOn: number;
  /** Our ping nonce after which it was written: a Pong of a later nonce proves the node read it. */
  sentBefore: number;
}

interface Session {
  token: Uint8Array;
  graceMs: number;
  address: string;
  lostAt: number | null;
}

const port = parentPort!;
const config = workerData as IoConfig;
const post = (m: FromIo) => port.postMessage(m);

let conn: Connection | null = null;
let generation = 0;
let registered = false;
let session: Session | null = null;
let nextJob = 1;
const jobs = new Map<number, Job>();
const byCorrelation = new Map<number | bigint, number>();
/**
 * Answers written on this connection and not yet proved read, oldest first; at most
 * `unprovedBound()`, the oldest forgotten beyond (a resume may then lose it, as in Rust).
 */
const unproved = new Set<number>();
let pingNonce = 0;
let pingOutstanding = false;
let draining: "none" | "ours" | "node" = "none";
let completedSinceDrain = 0;
/** The running drain's grace: when it fires, the work still in flight is aborted. */
let grace: { timer: NodeJS.Timeout; deadline: number } | null = null;
let stopping = false;
let failures = 0;
let nodeIndex = 0;

function post_pushes(items: PushItem[]): void {
  if (items.length > 0) post({ t: "pushes", items });
}

function reply(job: Job): Frame {
  return {
    name: "Reply",
    body: {
      correlation: job.correlation,
      response: { workflow_id: job.workflow_id, ordinal: job.ordinal, run_id: job.run_id, outcome: job.outcome },
    },
  };
}

/** Sends the answers that are ready and not yet written on this connection; one write. */
function flush(ids: Iterable<number>): void {
  if (!conn || conn.isClosed || !registered) return;
  const frames: Frame[] = [];
  for (const id of ids) {
    const job = jobs.get(id);
    if (!job || job.outcome === null || job.sentOn === generation) continue;
    frames.push(reply(job));
    job.sentOn = generation;
    job.sentBefore = pingNonce + 1;
    if (draining !== "none") completedSinceDrain++;
    if (!session) forget(id);
    else unproved.add(id);
  }
  for (const id of unproved) {
    if (unproved.size <= unprovedBound()) break;
    forget(id);
  }
  if (frames.length === 0) return;
  conn.sendMany(frames);
  proveLater();
  maybeDrained();
}

/** Asks the node for a Pong so the answers just written are proved read (held until then for a resume). */
function proveLater(): void {
  if (!session || pingOutstanding || !conn) return;
  pingOutstanding = true;
  pingNonce++;
  conn.send({ name: "Ping", body: { nonce: pingNonce } });
}

/** The most answers kept after writing them until a Pong proves them read: the capacity. */
function unprovedBound(): number {
  return Math.max(1, config.concurrency);
}

function proved(nonce: number): void {
  pingOutstanding = false;
  for (const id of unproved) {
    const job = jobs.get(id);
    if (job && job.sentBefore > nonce) break;
    forget(id);
  }
  // Answers written after that ping wait for the next one.
  if (unproved.size > 0) proveLater();
  maybeDrained();
}

function forget(id: number): void {
  unproved.delete(id);
  const job = jobs.get(id);
  if (!job) return;
  jobs.delete(id);
  if (byCorrelation.get(job.correlation) === id) byCorrelation.delete(job.correlation);
}

/** Forgets every job (the main thread is told separately, where it must be). */
function clearJobs(): void {
  jobs.clear();
  byCorrelation.clear();
  unproved.clear();
}

/** Requests held against the capacity: running, or finished with the answer not written on this connection. */
function running(): number {
  let n = 0;
  for (const job of jobs.values()) if (job.outcome === null || job.sentOn !== generation) n++;
  return n;
}

/** Starts (or shortens) the drain's grace: `ms` from now, the work still in flight is aborted. */
function startGrace(ms: number): void {
  const deadline = Date.now() + ms;
  if (grace && grace.deadline <= deadline) return;
  endGrace();
  const timer = setTimeout(graceOver, Math.min(ms, 2 ** 31 - 1));
  grace = { timer, deadline };
}

function endGrace(): void {
  if (grace) clearTimeout(grace.timer);
  grace = null;
}

/**
 * The drain's grace passed: the handlers still running are aborted and their requests
 * forgotten, answered nothing (the node ends those dispatches); then `Drained` goes out.
 */
function graceOver(): void {
  grace = null;
  if (draining === "none") return;
  const held = [...jobs].filter(([, job]) => job.outcome === null || job.sentOn !== generation).map(([id]) => id);
  if (held.length > 0) post({ t: "cancel", jobs: held, reason: "the drain's grace passed" });
  for (const id of held) forget(id);
  maybeDrained();
}

function maybeDrained(): void {
  if (draining === "none" || !conn || conn.isClosed) return;
  if (running() > 0) return;
  endGrace();
  const c = conn;
  const completed = completedSinceDrain;
  c.send({ name: "Drained", body: { completed } });
  session = null;
  clearJobs();
  if (draining === "ours") {
    stopping = true;
    c.goodbye("drained");
    post({ t: "drained", completed });
  } else {
    // The node drains: leave it and find another.
    c.goodbye("drained");
    draining = "none";
  }
}

/**
 * A drain of ours with no connection to finish it on: stops at once, as the Rust worker does;
 * the handlers still running are aborted (their answers could reach no node).
 */
function stopDrained(): void {
  stopping = true;
  endGrace();
  dropAll("drained while not connected to a node");
  post({ t: "drained", completed: completedSinceDrain });
}

/** Ends every job on the main thread's side (their results will find no push). */
function dropAll(reason: string): void {
  if (jobs.size > 0) post({ t: "cancel", jobs: [...jobs.keys()], reason });
  clearJobs();
}

function onFrame(frame: Frame): void {
  const b = frame.body;
  switch (frame.name) {
    case "Push":
    case "Push3": {
      const r = b.request;
      const same = byCorrelation.get(b.correlation);
      const held = same === undefined ? undefined : jobs.get(same);
      if (held && (held.outcome === null || held.sentOn !== generation)) {
        // A correlation still owed: the node's mistake, not a second request.
        return;
      }
      if (running() >= config.concurrency) {
        // Beyond the capacity registered: refused at once, so the node may place it elsewhere.
        const message = `worker is at its capacity of ${config.concurrency} requests`;
        conn?.send({
          name: "Reply",
          body: {
            correlation: b.correlation,
            response: { workflow_id: r.workflow_id, ordinal: r.ordinal, run_id: r.run_id, outcome: { Failure: { message, retryable: true } } },
          },
        });
        return;
      }
      const id = nextJob++;
      jobs.set(id, {
        correlation: b.correlation,
        workflow_id: r.workflow_id,
        ordinal: r.ordinal,
        run_id: r.run_id,
        outcome: null,
        sentOn: 0,
        sentBefore: 0,
      });
      byCorrelation.set(b.correlation, id);
      if (batch.length === 0) setImmediate(flushPushes);
      batch.push({ job: id, request: r, extras: b.extras ?? null });
      return;
    }
    case "Cancel": {
      const id = byCorrelation.get(b.correlation);
      if (id !== undefined) post({ t: "cancel", jobs: [id], reason: "cancelled by the node" });
      return;
    }
    case "Pong":
      if (typeof b.nonce === "number" && b.nonce === pingNonce) proved(b.nonce);
      return;
    case "Session":
      session = { token: b.token, graceMs: Number(b.resume_grace_ms), address: conn!.address, lostAt: null };
      return;
    case "Drain":
      if (draining === "none") {
        draining = "node";
        completedSinceDrain = 0;
        startGrace(Number(b.grace_ms));
        maybeDrained();
      }
      return;
    case "Goodbye":
      if (b.reason === "superseded") {
        stopping = true;
        post({ t: "stopped", reason: "superseded", error: { code: "refused", message: "superseded by a worker of the same deployment and instance id" } });
      }
      // A goodbye ends the session: nothing to resume.
      session = null;
      dropAll(`node said goodbye: ${b.reason}`);
      conn?.destroy(new LintelError("closed", `goodbye: ${b.reason}`));
      return;
    default:
      return;
  }
}

let batch: PushItem[] = [];

async function register(c: Connection): Promise<boolean> {
  const resumed = session !== null && session.lostAt !== null && Date.now() - session.lostAt < session.graceMs;
  return new Promise<boolean>((resolve, reject) => {
    c.onFrame = (frame) => {
      const b = frame.body;
      switch (frame.name) {
        case "Registered":
          resolve(false);
          post({ t: "registered", workerId: toWire(b.worker_id), nodeId: c.welcome.node_id, address: c.address, resumed: false });
          return;
        case "SessionResumed": {
          const attached = new Set<number | bigint>(b.attached);
          for (const corr of b.unknown as (number | bigint)[]) {
            const id = byCorrelation.get(corr);
            if (id !== undefined) {
              post({ t: "cancel", jobs: [id], reason: "its dispatch ended while the worker was away" });
              forget(id);
            }
          }
          for (const [id, job] of jobs) if (!attached.has(job.correlation)) forget(id);
          resolve(true);
          post({ t: "registered", workerId: toWire(b.worker_id), nodeId: c.welcome.node_id, address: c.address, resumed: true });
          return;
        }
        case "RegisterRefused":
          if (b.code === "SessionUnknown" || b.code === "Unsupported") {
            session = null;
            dropAll("session unknown to the node");
            sendRegister(c);
            return;
          }
          reject(new RefusedError(String(b.code), b.reason));
          return;
        default:
          onFrame(frame);
      }
    };
    c.onClose = (err) => reject(err);
    if (resumed && c.welcome.features.has("worker-resume")) {
      c.send({ name: "ResumeSession", body: { token: session!.token, holding: [...jobs.values()].map((j) => j.correlation) } });
    } else {
      if (session) {
        session = null;
        dropAll("session past its grace");
      }
      sendRegister(c);
    }
  });
}

function toWire(v: number | bigint): number | string {
  return typeof v === "bigint" ? v.toString() : v;
}

function sendRegister(c: Connection): void {
  const common = {
    namespaces: config.namespaces,
    task_queue: config.taskQueue,
    node: config.label,
    activity_types: config.activities,
    identity: config.identity,
    max_concurrency: config.concurrency,
  };
  if (c.welcome.version >= 3) {
    c.send({ name: "Register3", body: { ...common, deployment: config.deployment, instance_id: config.instanceId, extensions: [] } });
  } else {
    c.send({ name: "Register", body: common });
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** The order to try nodes in: the session's node first, then the others from a rotating start. */
function candidates(): string[] {
  const nodes = config.nodes;
  const start = nodeIndex++ % nodes.length;
  const order = [...nodes.slice(start), ...nodes.slice(0, start)];
  if (session) return [session.address, ...order.filter((a) => a !== session!.address)];
  return order;
}

async function run(): Promise<void> {
  while (!stopping) {
    let connected = false;
    for (const address of candidates()) {
      if (stopping) return;
      try {
        const c = await Connection.open({
          address,
          role: "Worker",
          name: config.name,
          authToken: config.authToken,
          tls: config.tls,
          features: WORKER_FEATURES,
          handshakeTimeoutMs: config.handshakeTimeoutMs,
        });
        if (stopping) {
          // Stopped (closed or drained) while this connection was being made.
          c.goodbye("stopped");
          return;
        }
        conn = c;
        generation++;
        // What was written on the last connection and not proved read is owed again.
        unproved.clear();
        // A drain the last node asked for ended with it: this node did not ask.
        if (draining === "node") draining = "none";
        registered = false;
        pingOutstanding = false;
        const resumed = await register(c);
        registered = true;
        connected = true;
        const registeredAt = Date.now();
        c.onFrame = onFrame;
        const lost = new Promise<LintelError>((resolve) => (c.onClose = resolve));
        if (resumed) {
          // Answers held through the outage go out on this connection.
          flush([...jobs.keys()]);
        }
        const err = await lost;
        registered = false;
        conn = null;
        // A drain's grace belongs to its connection: the node's drain ends with it, and ours stops below.
        endGrace();
        if (stopping) return;
        // A connection that held for the longest backoff was a good one; one lost sooner
        // counts as a failure, so a node that welcomes and drops is not redialled hot.
        failures = Date.now() - registeredAt >= config.backoffMaxMs ? 0 : failures + 1;
        post({ t: "disconnected", reason: err.message });
        if (draining === "ours") {
          stopDrained();
          return;
        }
        if (session && err.code !== "closed") {
          session.lostAt = Date.now();
        } else if (!session) {
          dropAll(`connection lost: ${err.message}`);
        }
        break;
      } catch (err) {
        conn = null;
        registered = false;
        if (session && session.lostAt === null) session.lostAt = Date.now();
        if (err instanceof RefusedError && err.refusal !== "Draining" && err.refusal !== "TooManyConnections") {
          stopping = true;
          post({ t: "stopped", reason: err.message, error: { code: err.code, message: err.message, refusal: err.refusal, refusalReason: err.reason } });
          return;
        }
      }
    }
    if (stopping) return;
    if (!connected) failures++;
    const backoff = Math.min(config.backoffMaxMs, config.backoffMinMs * 2 ** Math.min(failures, 16));
    await delay(backoff * (0.5 + Math.random() / 2));
  }
}

/** Pushes read in one burst reach the main thread in one message, posted once the burst is read. */
function flushPushes(): void {
  if (batch.length === 0) return;
  const items = batch;
  batch = [];
  post_pushes(items);
}

port.on("message", (m: ToIo) => {
  switch (m.t) {
    case "results": {
      const ids: number[] = [];
      for (const { job, outcome } of m.items) {
        const j = jobs.get(job);
        if (!j) continue;
        j.outcome = outcome;
        ids.push(job);
      }
      flush(ids);
      return;
    }
    case "progress": {
      const j = jobs.get(m.job);
      if (j && j.outcome === null && conn && registered) {
        const f = conn.welcome.features;
        if (f.has("progress") || f.has("heartbeat-timeout")) {
          conn.send({ name: "Progress", body: { correlation: j.correlation, details: m.details } });
        }
      }
      return;
    }
    case "drain":
      if (draining === "ours") return;
      draining = "ours";
      completedSinceDrain = 0;
      if (conn && registered) {
        conn.send({ name: "Drain", body: { grace_ms: m.graceMs ?? 0 } });
        if (m.graceMs !== null) startGrace(m.graceMs);
        maybeDrained();
      } else {
        conn?.goodbye("drained");
        stopDrained();
      }
      return;
    case "stop":
      stopping = true;
      endGrace();
      conn?.goodbye(m.reason);
      post({ t: "stopped", reason: m.reason });
      return;
  }
});

void run();
