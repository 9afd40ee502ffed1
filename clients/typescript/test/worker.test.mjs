// The worker against a real node: pongs while a handler blocks, cancellation, drain, session
// resumption across a dropped connection, heartbeats, headers.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as net from "node:net";
import { spawn } from "node:child_process";
import { join } from "node:path";
import { Client, Worker, failure } from "../dist/index.js";
import { PACKAGE, startNode, within, deferred } from "./helpers.mjs";

/** Waits for the first event of `sub` that `pred` accepts; every event read goes to `seen`. */
async function eventWhere(sub, pred, seen = []) {
  for await (const e of sub) {
    seen.push(e);
    if (pred(e)) return e;
  }
  throw new Error("subscription ended");
}

test("a handler that spins longer than the ping timeout leaves the worker eligible and completes", async () => {
  // The worker runs in a process of its own, so this one (the producer, the observer) stays free.
  const node = await startNode({}, ["--ping-interval-ms", "100", "--worker-ping-timeout-ms", "200"]);
  const client = await Client.connect({ nodes: node.addr });
  const sub = await client.subscribe(["workers"]);
  const seen = [];
  const child = spawn(process.execPath, [join(PACKAGE, "test", "fixtures", "spin-worker.mjs"), node.addr], { stdio: ["ignore", "pipe", "inherit"] });
  try {
    await within(10000, eventWhere(sub, (e) => e.event.kind === "worker-restored" && e.event.worker.identity === "spinner", seen), "out of probation");
    const spun = await client.dispatch("busy", "spin", "spin", { waitForWorkerMs: 5000 });
    assert.equal(spun.kind, "completed", JSON.stringify(spun));
    assert.equal(spun.outcome.text(), "done spin");
    // Still eligible at once: no wait allowed.
    const quick = await client.dispatch("busy", "spin", "quick", { waitForWorkerMs: 0 });
    assert.equal(quick.kind, "completed", JSON.stringify(quick));
    // Every event the node sent during the spin has arrived once a later status query is answered.
    await client.status();
    sub.close();
    for await (const e of sub) seen.push(e);
    const lapses = seen.filter((e) => e.event.worker?.identity === "spinner" && (e.event.kind === "worker-excluded" || e.event.kind === "worker-departed"));
    // Probation's exclusion is the only one: the worker answered every ping during the spin.
    assert.deepEqual(lapses.map((e) => `${e.event.kind}:${e.event.reason}`), ["worker-excluded:Probation"]);
  } finally {
    child.kill("SIGKILL");
    client.close();
    await node.stop();
  }
});

test("a cancelled dispatch aborts the handler's signal; the producer's abort rejects with AbortError", async () => {
  const node = await startNode();
  const { promise: startedP, resolve: started } = deferred();
  const { promise: abortedP, resolve: aborted } = deferred();
  const worker = new Worker({
    nodes: node.addr,
    namespaces: "c",
    activities: "wait",
    handler: (r) =>
      new Promise((_, reject) => {
        started();
        r.signal.addEventListener("abort", () => {
          aborted(r.signal.reason);
          reject(r.signal.reason);
        });
      }),
  });
  const client = await Client.connect({ nodes: node.addr });
  try {
    await worker.registered();
    const controller = new AbortController();
    const pending = client.dispatch("c", "wait", "x", { waitForWorkerMs: 5000, signal: controller.signal });
    await within(10000, startedP, "handler start");
    controller.abort();
    await assert.rejects(pending, (e) => e.name === "AbortError");
    const reason = await within(10000, abortedP, "handler abort");
    assert.match(reason.message, /cancel/);
  } finally {
    client.close();
    await worker.close();
    await node.stop();
  }
});

test("a request's deadline aborts its signal; headers and trace context reach the handler", async () => {
  const node = await startNode();
  const worker = new Worker({
    nodes: node.addr,
    namespaces: "d",
    activities: "a",
    handler: (r) =>
      new Promise((resolve) => {
        r.signal.addEventListener("abort", () => resolve(`${r.signal.reason.message}|${r.header("x-tenant")}|${r.traceparent}`));
      }),
  });
  const client = await Client.connect({ nodes: node.addr });
  try {
    await worker.registered();
    const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const r = await client.dispatch("d", "a", "x", {
      waitForWorkerMs: 5000,
      deadline: Date.now() + 300,
      headers: [["x-tenant", "acme"]],
      traceparent: tp,
    });
    assert.equal(r.kind, "completed");
    assert.equal(r.outcome.text(), `deadline passed|acme|${tp}`);
  } finally {
    client.close();
    await worker.close();
    await node.stop();
  }
});

test("drain finishes the request in flight, takes no new one, and the worker leaves", async () => {
  const node = await startNode();
  const { promise: gate, resolve: release } = deferred();
  const { promise: startedP, resolve: started } = deferred();
  const worker = new Worker({
    nodes: node.addr,
    namespaces: "dr",
    activities: "a",
    concurrency: 4,
    handler: async (r) => {
      started();
      await gate;
      return "finished " + r.text();
    },
  });
  const client = await Client.connect({ nodes: node.addr });
  const sub = await client.subscribe(["workers"]);
  try {
    await worker.registered();
    const inFlight = client.dispatch("dr", "a", "one", { waitForWorkerMs: 5000 });
    await within(10000, startedP, "handler start");
    const drained = worker.drain();
    await within(10000, eventWhere(sub, (e) => e.event.kind === "worker-excluded" && e.event.reason === "Draining"), "excluded as draining");
    // Draining: a new dispatch finds no eligible worker.
    const refused = await client.dispatch("dr", "a", "two", { waitForWorkerMs: 0 });
    assert.equal(refused.kind, "no-worker", JSON.stringify(refused));
    release();
    const r = await inFlight;
    assert.equal(r.kind, "completed");
    assert.equal(r.outcome.text(), "finished one");
    await within(10000, drained, "drain");
  } finally {
    client.close();
    await worker.close();
    await node.stop();
  }
});

/** A TCP proxy whose connections the test can cut, to lose a worker's connection without its knowing. */
async function proxy(target) {
  const [host, port] = target.split(":");
  const sockets = new Set();
  let refusing = false;
  const server = net.createServer((client) => {
    if (refusing) return client.destroy();
    const upstream = net.connect({ host, port: Number(port) });
    sockets.add(client);
    sockets.add(upstream);
    client.pipe(upstream);
    upstream.pipe(client);
    const close = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on("error", close).on("close", close);
    upstream.on("error", close).on("close", close);
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    addr: `127.0.0.1:${server.address().port}`,
    cut() {
      for (const s of sockets) s.destroy();
    },
    refuse(on) {
      refusing = on;
    },
    close() {
      this.cut();
      server.close();
    },
  };
}

test("a worker whose connection drops resumes its session and delivers the result it held", async () => {
  const node = await startNode();
  const px = await proxy(node.addr);
  const { promise: gate, resolve: release } = deferred();
  const { promise: startedP, resolve: started } = deferred();
  const worker = new Worker({
    nodes: px.addr,
    namespaces: "rs",
    activities: "a",
    backoffMinMs: 20,
    handler: async (r) => {
      started();
      await gate;
      return "held " + r.text();
    },
  });
  const resumed = new Promise((r) => worker.on("registered", (info) => info.resumed && r(info)));
  const client = await Client.connect({ nodes: node.addr });
  try {
    await worker.registered();
    const firstId = worker.workerId;
    const pending = client.dispatch("rs", "a", "x", { waitForWorkerMs: 5000, replyTimeoutMs: 20000 });
    await within(10000, startedP, "handler start");
    px.cut();
    const info = await within(10000, resumed, "session resumed");
    assert.equal(info.workerId, firstId);
    release();
    const r = await pending;
    assert.equal(r.kind, "completed", JSON.stringify(r));
    assert.equal(r.outcome.text(), "held x");
  } finally {
    client.close();
    await worker.close();
    px.close();
    await node.stop();
  }
});

test("past the session's grace the dispatch ends worker-lost, the handler is aborted and the worker registers anew", async () => {
  const node = await startNode({ LINTEL_WORKER_RESUME_GRACE_MS: "200" });
  const px = await proxy(node.addr);
  const { promise: abortedP, resolve: aborted } = deferred();
  const { promise: startedP, resolve: started } = deferred();
  const worker = new Worker({
    nodes: px.addr,
    namespaces: "rg",
    activities: "a",
    backoffMinMs: 20,
    handler: (r) =>
      new Promise((_, reject) => {
        started();
        r.signal.addEventListener("abort", () => {
          aborted(r.signal.reason);
          reject(r.signal.reason);
        });
      }),
  });
  const registrations = [];
  const again = new Promise((r) => worker.on("registered", (info) => registrations.push(info) === 2 && r(info)));
  const client = await Client.connect({ nodes: node.addr });
  try {
    await worker.registered();
    const pending = client.dispatch("rg", "a", "x", { waitForWorkerMs: 5000, replyTimeoutMs: 20000 });
    await within(10000, startedP, "handler start");
    px.refuse(true);
    px.cut();
    const r = await pending;
    assert.equal(r.kind, "worker-lost", JSON.stringify(r));
    px.refuse(false);
    const info = await within(10000, again, "registered again");
    assert.equal(info.resumed, false);
    await within(10000, abortedP, "handler aborted");
  } finally {
    client.close();
    await worker.close();
    px.close();
    await node.stop();
  }
});

test("heartbeats keep a dispatch with a heartbeat timeout alive; silence ends it heartbeat-timeout", async () => {
  const node = await startNode();
  const worker = new Worker({
    nodes: node.addr,
    namespaces: "hb",
    activities: "a",
    concurrency: 2,
    handler: async (r) => {
      const beats = r.text() === "beat" ? 6 : 0;
      for (let i = 0; i < 6; i++) {
        if (beats) r.heartbeat(String(i));
        await new Promise((res) => setTimeout(res, 100));
        if (r.signal.aborted) throw r.signal.reason;
      }
      return "ok";
    },
  });
  const client = await Client.connect({ nodes: node.addr });
  try {
    await worker.registered();
    const watched = client.watch("hb", "a", "beat", { waitForWorkerMs: 5000, heartbeatTimeoutMs: 300 });
    const details = [];
    for await (const d of watched.progress) details.push(new TextDecoder().decode(d));
    const ok = await watched.result;
    assert.equal(ok.kind, "completed");
    assert.deepEqual(details, ["0", "1", "2", "3", "4", "5"]);
    const silent = await client.dispatch("hb", "a", "quiet", { waitForWorkerMs: 5000, heartbeatTimeoutMs: 300 });
    assert.equal(silent.kind, "heartbeat-timeout", JSON.stringify(silent));
  } finally {
    client.close();
    await worker.close();
    await node.stop();
  }
});

test("a thrown error or failure() is a completed failure with its retryable flag", async () => {
  const node = await startNode();
  const worker = new Worker({
    nodes: node.addr,
    namespaces: "f",
    activities: "a",
    handler: (r) => {
      if (r.text() === "throw") throw new Error("boom");
      return failure("no such order", false);
    },
  });
  const client = await Client.connect({ nodes: node.addr });
  try {
    await worker.registered();
    const thrown = await client.dispatch("f", "a", "throw", { waitForWorkerMs: 5000 });
    assert.deepEqual(thrown.outcome, { kind: "failure", message: "boom", retryable: true });
    const failed = await client.dispatch("f", "a", "fail", { waitForWorkerMs: 5000 });
    assert.deepEqual(failed.outcome, { kind: "failure", message: "no such order", retryable: false });
  } finally {
    client.close();
    await worker.close();
    await node.stop();
  }
});
