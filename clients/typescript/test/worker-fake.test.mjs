// The worker against fake nodes that do what a real node should not (or rarely does): pushes
// beyond capacity, a reused correlation, no pongs, drains and drops, to check its bounds.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as net from "node:net";
import { RefusedError, Worker, codec } from "../dist/index.js";
import { within, deferred } from "./helpers.mjs";

const { encodeFrame, decodeBody, FrameReader } = codec;

const LIMITS = { max_frame_len: 4194304, max_in_flight: 1024, ping_interval_ms: 5000, max_missed_pings: 3, max_name_len: 255, max_set_len: 64 };

/**
 * A fake node for workers: shakes hands as a version-4 node and answers the worker's pings
 * (unless `pong` is false); each connection goes to `onConnection(c)`, where `c.next(name)`
 * waits for the next frame of that name from the worker, `c.send(frame)` writes one, and
 * `c.frames` records them all. `connections` lists them.
 */
async function fakeNode(onConnection, { pong = true } = {}) {
  const connections = [];
  const server = net.createServer((socket) => {
    socket.on("error", () => {});
    const reader = new FrameReader();
    const frames = [];
    const waiters = [];
    let closedResolve;
    const c = {
      index: connections.length,
      at: Date.now(),
      frames,
      closed: new Promise((r) => (closedResolve = r)),
      send: (frame) => socket.write(encodeFrame(frame)),
      destroy: () => socket.destroy(),
      next(name, ms = 5000) {
        const seen = frames.filter((f) => f.name === name).length;
        const want = (c.taken[name] = (c.taken[name] ?? 0) + 1);
        if (seen >= want) return Promise.resolve(frames.filter((f) => f.name === name)[want - 1]);
        return within(ms, new Promise((resolve) => waiters.push({ name, want, resolve })), `${name} #${want} on connection ${c.index}`);
      },
      taken: {},
    };
    connections.push(c);
    socket.on("close", () => closedResolve());
    socket.on("data", (chunk) => {
      reader.push(chunk);
      for (let body; (body = reader.next()) !== null; ) {
        const frame = decodeBody(body);
        frames.push(frame);
        if (frame.name === "Hello") {
          c.send({
            name: "Welcome3",
            body: { version: 4, node_id: "fake", pid: 1, limits: LIMITS, header_limits: { max_headers: 32, max_header_bytes: 8192 }, features: ["headers", "progress", "heartbeat-timeout", "worker-resume"] },
          });
          onConnection(c);
        } else if (frame.name === "Ping" && pong) {
          c.send({ name: "Pong", body: { nonce: frame.body.nonce } });
        }
        for (const w of waiters.splice(0)) {
          const n = frames.filter((f) => f.name === w.name).length;
          if (n >= w.want) w.resolve(frames.filter((f) => f.name === w.name)[w.want - 1]);
          else waiters.push(w);
        }
      }
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    addr: `127.0.0.1:${server.address().port}`,
    connections,
    close() {
      for (const c of connections) c.destroy();
      server.close();
    },
  };
}

const push = (correlation, input) => ({
  name: "Push3",
  body: {
    correlation,
    request: { namespace: "ns", task_queue: "", activity_type: "a", node: null, workflow_id: "", ordinal: 0, run_id: null, attempt: 1, input: new TextEncoder().encode(input), deadline_unix_ms: null },
    extras: { headers: [], priority: null, fairness_key: null, fairness_weight: null, deployment: null, extensions: [] },
  },
});

const text = (reply) => {
  const o = reply.body.response.outcome;
  return o.Success ? `success ${new TextDecoder().decode(o.Success)}` : `failure ${o.Failure.retryable ? "retryable" : "final"} ${o.Failure.message}`;
};

test("a push beyond the worker's capacity is refused with a retryable failure; a correlation still owed is ignored", async () => {
  const { promise: ready, resolve: firstConnection } = deferred();
  const node = await fakeNode(async (c) => {
    await c.next("Register3");
    c.send({ name: "Registered", body: { worker_id: 7 } });
    firstConnection(c);
  });
  const { promise: gate, resolve: release } = deferred();
  const started = [];
  const worker = new Worker({
    nodes: node.addr,
    namespaces: "ns",
    activities: "a",
    concurrency: 1,
    handler: async (r) => {
      started.push(r.text());
      await gate;
      return "done " + r.text();
    },
  });
  try {
    await within(5000, worker.registered(), "registration");
    const c = await ready;
    c.send(push(1, "one"));
    c.send(push(1, "one again"));
    c.send(push(2, "two"));
    const refused = await c.next("Reply");
    assert.equal(refused.body.correlation, 2);
    assert.equal(text(refused), "failure retryable worker is at its capacity of 1 requests");
    release();
    const done = await c.next("Reply");
    assert.deepEqual([done.body.correlation, text(done)], [1, "success done one"]);
    // Capacity free again: the next push runs.
    c.send(push(3, "three"));
    const third = await c.next("Reply");
    assert.deepEqual([third.body.correlation, text(third)], [3, "success done three"]);
    assert.deepEqual(started, ["one", "three"]);
  } finally {
    await worker.close();
    node.close();
  }
});

test("answers written and never proved read by a Pong are held up to the capacity, the latest kept for a resume", async () => {
  const conns = [];
  let arrived;
  let wanted = 0;
  const node = await fakeNode(
    async (c) => {
      conns.push(c);
      if (conns.length === wanted) arrived(c);
      if (c.index === 0) {
        await c.next("Register3");
        c.send({ name: "Registered", body: { worker_id: 7 } });
        c.send({ name: "Session", body: { token: new Uint8Array(16).fill(9), resume_grace_ms: 60000 } });
      }
    },
    { pong: false },
  );
  const connection = (n) => {
    wanted = n;
    if (conns.length >= n) return Promise.resolve(conns[n - 1]);
    return within(10000, new Promise((r) => (arrived = r)), `connection ${n}`);
  };
  const worker = new Worker({ nodes: node.addr, namespaces: "ns", activities: "a", concurrency: 2, backoffMinMs: 10, handler: (r) => "done " + r.text() });
  try {
    await within(5000, worker.registered(), "registration");
    const c = await connection(1);
    for (let i = 1; i <= 6; i++) {
      c.send(push(i, String(i)));
      const reply = await c.next("Reply");
      assert.equal(reply.body.correlation, i);
    }
    c.destroy();
    const again = await connection(2);
    const resume = await again.next("ResumeSession");
    assert.deepEqual(resume.body.holding, [5, 6]);
    again.send({ name: "SessionResumed", body: { worker_id: 7, attached: [5, 6], unknown: [] } });
    const redelivered = [await again.next("Reply"), await again.next("Reply")];
    assert.deepEqual(redelivered.map((f) => [f.body.correlation, text(f)]), [[5, "success done 5"], [6, "success done 6"]]);
  } finally {
    await worker.close();
    node.close();
  }
});

test("a drain the node asked for ends with that connection: the next node is not told Drained", async () => {
  const conns = [];
  const waiting = [];
  // A connection counts once the worker is registered on it.
  const node = await fakeNode(async (c) => {
    await c.next("Register3");
    c.send({ name: "Registered", body: { worker_id: 7 + c.index } });
    conns.push(c);
    for (const w of waiting.splice(0)) {
      if (conns.length >= w.n) w.resolve(conns[w.n - 1]);
      else waiting.push(w);
    }
  });
  const connection = (n) =>
    conns.length >= n ? Promise.resolve(conns[n - 1]) : within(10000, new Promise((resolve) => waiting.push({ n, resolve })), `connection ${n}`);
  const { promise: startedP, resolve: started } = deferred();
  const worker = new Worker({
    nodes: node.addr,
    namespaces: "ns",
    activities: "a",
    concurrency: 2,
    backoffMinMs: 10,
    handler: (r) => {
      if (r.text() !== "slow") return "done " + r.text();
      started();
      return new Promise((_, reject) => r.signal.addEventListener("abort", () => reject(r.signal.reason)));
    },
  });
  try {
    await within(5000, worker.registered(), "registration");
    const first = await connection(1);
    first.send(push(1, "slow"));
    await within(5000, startedP, "handler start");
    first.send({ name: "Drain", body: { grace_ms: 10000 } });
    // Lost while draining, the request still running.
    first.destroy();
    const second = await connection(2);
    second.send(push(2, "two"));
    assert.equal(text(await second.next("Reply")), "success done two");
    second.send(push(3, "three"));
    assert.equal(text(await second.next("Reply")), "success done three");
    assert.deepEqual(second.frames.filter((f) => f.name === "Drained" || f.name === "Goodbye"), []);
  } finally {
    await worker.close();
    node.close();
  }
});

test("a drain whose node is lost with work in flight stops at once, aborting the handler, instead of waiting for a node", async () => {
  const { node, c, worker, abortedP } = await stuckHandler({ session: true });
  try {
    const drained = worker.drain();
    await c.next("Drain");
    // The node goes away for good.
    node.close();
    await within(10000, drained, "drain");
    const reason = await within(5000, abortedP, "handler aborted");
    assert.match(reason.message, /drained while not connected/);
  } finally {
    await worker.close();
    node.close();
  }
});

test("a node that registers the worker and drops it at once is redialled with growing backoff", async () => {
  const node = await fakeNode(async (c) => {
    // The worker may be closed between a dial and its Register3: that connection just ends.
    const register = await c.next("Register3").catch(() => null);
    if (!register) return;
    c.send({ name: "Registered", body: { worker_id: 7 } });
    c.destroy();
  });
  const worker = new Worker({ nodes: node.addr, namespaces: "ns", activities: "a", backoffMinMs: 50, backoffMaxMs: 2000, handler: () => "" });
  try {
    let poll;
    await within(20000, new Promise((r) => (poll = setInterval(() => node.connections.length >= 6 && r(), 10))), "six connections").finally(() => clearInterval(poll));
    const at = node.connections.map((c) => c.at);
    const gaps = at.slice(1).map((t, i) => t - at[i]);
    // The fifth redial waits half of 50 ms doubled five times at least: 800 ms.
    assert.ok(gaps[4] >= 400, `gaps between dials ${gaps.join(", ")} ms`);
  } finally {
    await worker.close();
    node.close();
  }
});

test("a registration the node refuses rejects registered() with a RefusedError naming the refusal", async () => {
  const node = await fakeNode(async (c) => {
    await c.next("Register3");
    c.send({ name: "RegisterRefused", body: { code: "Unauthorized", reason: "no such tenant" } });
  });
  const worker = new Worker({ nodes: node.addr, namespaces: "ns", activities: "a", handler: () => "" });
  try {
    await assert.rejects(within(5000, worker.registered(), "registration settles"), (e) => e instanceof RefusedError && e.refusal === "Unauthorized" && e.reason === "no such tenant");
  } finally {
    await worker.close();
    node.close();
  }
});

/**
 * A worker on a fake node, registered (given a session when `session`), running one handler
 * that ignores its AbortSignal and never resolves; `extra` goes to the worker's options.
 * Returns the connection, the worker and a promise of the signal's reason.
 */
async function stuckHandler({ session = false, ...extra } = {}) {
  const { promise: ready, resolve: registeredOn } = deferred();
  const node = await fakeNode(async (c) => {
    await c.next("Register3");
    c.send({ name: "Registered", body: { worker_id: 7 } });
    if (session) c.send({ name: "Session", body: { token: new Uint8Array(16).fill(3), resume_grace_ms: 60000 } });
    registeredOn(c);
  });
  const { promise: startedP, resolve: started } = deferred();
  const { promise: abortedP, resolve: aborted } = deferred();
  const worker = new Worker({
    nodes: node.addr,
    namespaces: "ns",
    activities: "a",
    backoffMinMs: 10,
    ...extra,
    handler: (r) => {
      r.signal.addEventListener("abort", () => aborted(r.signal.reason));
      started();
      return new Promise(() => {});
    },
  });
  await within(5000, worker.registered(), "registration");
  const c = await ready;
  c.send(push(1, "forever"));
  await within(5000, startedP, "handler start");
  return { node, c, worker, abortedP };
}

test("drain({graceMs}) aborts a handler that never finishes once the grace passes, then says Drained and Goodbye", async () => {
  const { node, c, worker, abortedP } = await stuckHandler();
  try {
    const began = Date.now();
    await within(5000, worker.drain({ graceMs: 300 }), "drain past its grace");
    assert.ok(Date.now() - began >= 250, `drain resolved after ${Date.now() - began} ms, before its grace`);
    const reason = await within(1000, abortedP, "handler aborted");
    assert.match(reason.message, /grace/);
    assert.equal((await c.next("Drain")).body.grace_ms, 300);
    assert.equal((await c.next("Drained")).body.completed, 0);
    assert.equal((await c.next("Goodbye")).body.reason, "drained");
    // Nothing is answered for the aborted request: the node ends its dispatch.
    assert.deepEqual(c.frames.filter((f) => f.name === "Reply"), []);
  } finally {
    await worker.close();
    node.close();
  }
});

test("drainGraceMs is the grace of a drain() given none", async () => {
  const { node, c, worker, abortedP } = await stuckHandler({ drainGraceMs: 200 });
  try {
    await within(5000, worker.drain(), "drain past its grace");
    await within(1000, abortedP, "handler aborted");
    assert.equal((await c.next("Drained")).body.completed, 0);
    assert.equal((await c.next("Goodbye")).body.reason, "drained");
  } finally {
    await worker.close();
    node.close();
  }
});

test("a Drain from the node with a short grace aborts a handler that never finishes, then says Drained and Goodbye", async () => {
  const { node, c, worker, abortedP } = await stuckHandler();
  try {
    c.send({ name: "Drain", body: { grace_ms: 200 } });
    const reason = await within(5000, abortedP, "handler aborted");
    assert.match(reason.message, /grace/);
    assert.equal((await c.next("Drained")).body.completed, 0);
    assert.equal((await c.next("Goodbye")).body.reason, "drained");
    assert.deepEqual(c.frames.filter((f) => f.name === "Reply"), []);
  } finally {
    await worker.close();
    node.close();
  }
});
