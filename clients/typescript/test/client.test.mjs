// The producer Client: against fake nodes that misbehave on purpose, and real nodes for failover.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as net from "node:net";
import { Client, ConnectionLostError, LintelError, UnknownVariantError, Worker, codec } from "../dist/index.js";
import { startNode, within } from "./helpers.mjs";

const { encodeFrame, decodeBody, FrameReader } = codec;

const LIMITS = { max_frame_len: 4194304, max_in_flight: 1024, ping_interval_ms: 5000, max_missed_pings: 3, max_name_len: 255, max_set_len: 64 };

/**
 * A fake node: shakes hands as a version-4 node, then hands each frame the client sends to
 * `onFrame(frame, socket, index)`. `frames` records them.
 */
async function fakeNode(onFrame) {
  const frames = [];
  const sockets = new Set();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => {});
    const reader = new FrameReader();
    socket.on("data", (chunk) => {
      reader.push(chunk);
      for (let body; (body = reader.next()) !== null; ) {
        const frame = decodeBody(body);
        frames.push(frame);
        if (frame.name === "Hello") {
          socket.write(
            encodeFrame({
              name: "Welcome3",
              body: { version: 4, node_id: "fake", pid: 1, limits: LIMITS, header_limits: { max_headers: 32, max_header_bytes: 8192 }, features: ["headers", "progress", "heartbeat-timeout"] },
            }),
          );
        } else if (frame.name !== "Features") {
          onFrame(frame, socket, frames.filter((f) => f.name === frame.name).length - 1);
        }
      }
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    addr: `127.0.0.1:${server.address().port}`,
    frames,
    close() {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

const served = (correlation, result) => encodeFrame({ name: "ServedOutcome", body: { correlation, served_by: "fake", result } });
const success = (text) => ({ Completed: { workflow_id: "", ordinal: 0, run_id: null, outcome: { Success: new TextEncoder().encode(text) } } });

test("a node closing in the middle of a frame is a typed error, not a hang", async () => {
  const fake = await fakeNode((frame, socket) => {
    const whole = served(frame.body.correlation, success("never"));
    socket.end(whole.subarray(0, whole.length - 3));
  });
  try {
    const client = await Client.connect({ nodes: fake.addr });
    await assert.rejects(
      within(5000, client.dispatch("ns", "a", "x", { retry: false }), "dispatch settles"),
      (e) => e instanceof ConnectionLostError && e.cause?.code === "truncated" && e.mayHaveRun === true,
    );
  } finally {
    fake.close();
  }
});

test("a frame over the negotiated maximum is refused before its body is read, with Error{Oversize}", async () => {
  let errorFrame;
  const fake = await fakeNode((frame, socket) => {
    if (frame.name === "Error") {
      errorFrame = frame;
      return;
    }
    socket.write(Buffer.from("7fffffff00", "hex"));
  });
  try {
    const client = await Client.connect({ nodes: fake.addr });
    await assert.rejects(
      within(5000, client.dispatch("ns", "a", "x", { retry: false }), "dispatch settles"),
      (e) => e instanceof ConnectionLostError && e.cause?.code === "oversize",
    );
    let poll;
    await within(5000, new Promise((r) => (poll = setInterval(() => errorFrame && r(), 10))), "Error frame at the fake node").finally(() => clearInterval(poll));
    assert.equal(errorFrame.body.code, "Oversize");
  } finally {
    fake.close();
  }
});

test("an outcome variant from a newer node rejects that dispatch with UnknownVariantError; the connection stays", async () => {
  const fake = await fakeNode((frame, socket, i) => {
    if (frame.name !== "Submit3") return;
    const c = frame.body.correlation;
    if (i === 0) {
      // ServedOutcome { correlation, served_by: "fake", result: variant 11 }
      const body = Buffer.concat([Buffer.from([0x18]), encodeVarint(c), Buffer.from([4, ...Buffer.from("fake"), 11])]);
      const len = Buffer.alloc(4);
      len.writeUInt32BE(body.length);
      socket.write(Buffer.concat([len, body]));
    } else {
      socket.write(served(c, success("fine")));
    }
  });
  try {
    const client = await Client.connect({ nodes: fake.addr });
    await assert.rejects(client.dispatch("ns", "a", "x"), (e) => e instanceof UnknownVariantError && e.type === "DispatchResult" && e.index === 11);
    const r = await client.dispatch("ns", "a", "x");
    assert.equal(r.kind, "completed");
    assert.equal(r.outcome.text(), "fine");
    client.close();
  } finally {
    fake.close();
  }
});

function encodeVarint(n) {
  const out = [];
  while (n >= 0x80) {
    out.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return Buffer.from(out);
}

test("what may have run is not retried unless idempotent; draining moves to the next node", async () => {
  const answers = [];
  const lossy = await fakeNode((frame, socket) => {
    if (frame.name === "Submit3") socket.write(served(frame.body.correlation, answers.shift()));
  });
  const draining = await fakeNode((frame, socket) => {
    if (frame.name === "Submit3") socket.write(served(frame.body.correlation, "Draining"));
  });
  try {
    const client = await Client.connect({ nodes: lossy.addr });
    answers.push({ WorkerLost: { worker_id: 3 } }, success("unused"));
    const lost = await client.dispatch("ns", "a", "x");
    assert.equal(lost.kind, "worker-lost");
    assert.deepEqual(lost.retried, []);
    answers.length = 0;
    answers.push({ WorkerLost: { worker_id: 3 } }, success("twice"));
    const again = await client.dispatch("ns", "a", "x", { retry: { idempotent: true } });
    assert.equal(again.kind, "completed");
    assert.deepEqual(again.retried.map((r) => r.reason), ["may-have-run"]);
    client.close();

    const two = await Client.connect({ nodes: [draining.addr, lossy.addr] });
    answers.length = 0;
    answers.push(success("elsewhere"));
    const moved = await two.dispatch("ns", "a", "x");
    assert.equal(moved.kind, "completed");
    assert.equal(moved.node, lossy.addr);
    assert.deepEqual(moved.retried, [{ node: draining.addr, reason: "draining" }]);
    two.close();
  } finally {
    lossy.close();
    draining.close();
  }
});

test("a client of several nodes skips one that does not answer and fails over when its node goes away", async () => {
  const a = await startNode();
  const b = await startNode();
  const dead = net.createServer();
  await new Promise((r) => dead.listen(0, "127.0.0.1", r));
  const deadAddr = `127.0.0.1:${dead.address().port}`;
  dead.close();
  const wa = new Worker({ nodes: a.addr, namespaces: "fo", activities: "a", handler: () => "from a" });
  const wb = new Worker({ nodes: b.addr, namespaces: "fo", activities: "a", handler: () => "from b" });
  let client;
  try {
    await wa.registered();
    await wb.registered();
    client = await Client.connect({ nodes: [deadAddr, a.addr, b.addr] });
    const first = await client.dispatch("fo", "a", "x", { waitForWorkerMs: 5000 });
    const firstNode = first.node;
    assert.notEqual(firstNode, deadAddr);
    const [gone, other] = firstNode === a.addr ? [a, b] : [b, a];
    await gone.stop();
    // A dispatch written before the client reads the close may have run (and is not retried):
    // wait until the client has seen its node go.
    let poll;
    await within(10000, new Promise((r) => (poll = setInterval(() => !client.connected && r(), 10))), "client sees its node go").finally(() => clearInterval(poll));
    const second = await client.dispatch("fo", "a", "x", { waitForWorkerMs: 5000 });
    assert.equal(second.kind, "completed", JSON.stringify(second));
    assert.equal(second.node, other.addr);
  } finally {
    client?.close();
    await wa.close();
    await wb.close();
    await a.stop();
    await b.stop();
  }
});

test("a draining answer moves new work to another node; the old connection stays until its pending dispatch ends, then says goodbye", async () => {
  let held;
  const draining = await fakeNode((frame, socket, i) => {
    if (frame.name !== "Submit3") return;
    if (i === 0) held = { socket, correlation: frame.body.correlation };
    else socket.write(served(frame.body.correlation, "Draining"));
  });
  const other = await fakeNode((frame, socket) => {
    if (frame.name === "Submit3") socket.write(served(frame.body.correlation, success("elsewhere")));
  });
  let client;
  try {
    client = await Client.connect({ nodes: [draining.addr, other.addr] });
    const first = client.dispatch("ns", "a", "first", { retry: false });
    let poll;
    await within(5000, new Promise((r) => (poll = setInterval(() => held && r(), 5))), "first submission at the node").finally(() => clearInterval(poll));
    const second = await within(5000, client.dispatch("ns", "a", "second"), "second dispatch");
    assert.equal(second.node, other.addr);
    assert.deepEqual(second.retried, [{ node: draining.addr, reason: "draining" }]);
    // The draining node still answers what it was given before.
    assert.equal(draining.frames.some((f) => f.name === "Goodbye"), false, "goodbye while a dispatch is pending there");
    held.socket.write(served(held.correlation, success("still answered")));
    const r = await within(5000, first, "first dispatch");
    assert.equal(r.kind, "completed", JSON.stringify(r));
    assert.equal(r.outcome.text(), "still answered");
    await within(5000, new Promise((res) => (poll = setInterval(() => draining.frames.some((f) => f.name === "Goodbye") && res(), 5))), "goodbye on the drained connection").finally(() => clearInterval(poll));
  } finally {
    client?.close();
    draining.close();
    other.close();
  }
});

test("a status query or subscription the node never answers rejects with a typed timeout; bad options are typed invalid", async () => {
  const silent = await fakeNode(() => {});
  let client;
  try {
    client = await Client.connect({ nodes: silent.addr, requestTimeoutMs: 200 });
    await assert.rejects(within(5000, client.status(), "status settles"), (e) => e instanceof LintelError && e.code === "timeout");
    await assert.rejects(within(5000, client.subscribe(["workers"]), "subscribe settles"), (e) => e instanceof LintelError && e.code === "timeout");
  } finally {
    client?.close();
    silent.close();
  }
  const invalid = (e) => e instanceof LintelError && e.code === "invalid";
  await assert.rejects(Client.connect({ nodes: "no-port-here" }), invalid);
  await assert.rejects(Client.connect({ nodes: "127.0.0.1:1", backoffMinMs: -1 }), invalid);
  assert.throws(() => new Worker({ nodes: "no-port-here", namespaces: "n", activities: "a", handler: () => "" }), invalid);
  assert.throws(() => new Worker({ nodes: "127.0.0.1:1", namespaces: "n", activities: "a" }), invalid);
});
