// Plays the feature-matrix runner's steps (sdk-contract.md) with the TypeScript agent in both
// roles against a real node, one test per scenario.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { join } from "node:path";
import { PACKAGE, REPO, startNode, within } from "./helpers.mjs";

const AGENT = join(PACKAGE, "dist", "matrix", "agent.js");

/** Starts an agent; `lines` collects its stdout lines, `waitFor(line)` resolves when it prints it. */
function agent(role, addr, scenario, extra = []) {
  const proc = spawn(process.execPath, [AGENT, role, "--addr", addr, "--scenario", scenario, ...extra], {
    cwd: REPO,
    stdio: ["pipe", "pipe", "pipe"],
  });
  const lines = [];
  const waiters = [];
  let buf = "";
  let stderr = "";
  proc.stderr.on("data", (d) => (stderr += d));
  proc.stdout.on("data", (d) => {
    buf += d;
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      lines.push(line);
      for (const w of waiters) if (w.match(line)) w.resolve(line);
    }
  });
  const exited = new Promise((resolve) => proc.once("exit", (code, signal) => resolve({ code, signal })));
  return {
    proc,
    lines,
    exited,
    stderr: () => stderr,
    waitFor(prefix, ms = 15000) {
      const found = lines.find((l) => l.startsWith(prefix));
      if (found) return Promise.resolve(found);
      return within(ms, new Promise((resolve) => waiters.push({ match: (l) => l.startsWith(prefix), resolve })), `${role} line ${prefix} (saw ${JSON.stringify(lines)})`);
    },
    kill(signal = "SIGKILL") {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
    },
  };
}

async function producerPasses(p) {
  const { code } = await within(30000, p.exited, "producer exit");
  assert.deepEqual({ code, last: p.lines.at(-1) }, { code: 0, last: "pass" }, `producer: ${p.lines.join(" | ")} ${p.stderr()}`);
}

async function scenario(name, run, env = {}) {
  const node = await startNode(env);
  const started = [];
  const spawnAgent = (...a) => {
    const x = agent(...a);
    started.push(x);
    return x;
  };
  try {
    await run(node.addr, spawnAgent);
  } finally {
    for (const x of started) x.kill();
    await node.stop();
  }
}

const simple = (name) => async (addr, run) => {
  const w = run("worker", addr, name);
  await w.waitFor("ready");
  await producerPasses(run("producer", addr, name));
};

test("echo", () => scenario("echo", simple("echo")));
test("headers", () => scenario("headers", simple("headers")));
test("heartbeat", () => scenario("heartbeat", simple("heartbeat")));

test("no-worker", () => scenario("no-worker", async (addr, run) => producerPasses(run("producer", addr, "no-worker"))));

test("worker-lost", () =>
  scenario(
    "worker-lost",
    async (addr, run) => {
      const w = run("worker", addr, "worker-lost");
      await w.waitFor("ready");
      const p = run("producer", addr, "worker-lost");
      await w.waitFor("started");
      w.kill("SIGKILL");
      await producerPasses(p);
    },
    { LINTEL_WORKER_RESUME_GRACE_MS: "300" },
  ));

test("timeout", () =>
  scenario("timeout", async (addr, run) => {
    const w = run("worker", addr, "timeout");
    await w.waitFor("ready");
    const p = run("producer", addr, "timeout");
    await w.waitFor("started");
    await producerPasses(p);
  }));

test("cancel", () =>
  scenario("cancel", async (addr, run) => {
    const w = run("worker", addr, "cancel");
    await w.waitFor("ready");
    const p = run("producer", addr, "cancel");
    await p.waitFor("ready");
    await w.waitFor("started");
    p.proc.stdin.write("go\n");
    await w.waitFor("cancelled", 10000);
    await producerPasses(p);
  }));

test("drain", () =>
  scenario("drain", async (addr, run) => {
    const w = run("worker", addr, "drain");
    await w.waitFor("ready");
    const p = run("producer", addr, "drain");
    await w.waitFor("started");
    w.kill("SIGTERM");
    await producerPasses(p);
    const { code } = await within(10000, w.exited, "worker exit after drain");
    assert.equal(code, 0);
    assert.ok(w.lines.includes("drained"), w.lines.join(" | "));
  }));

test("deployment", () =>
  scenario("deployment", async (addr, run) => {
    const blue = run("worker", addr, "deployment", ["--deployment", "blue", "--identity", "matrix-blue"]);
    const green = run("worker", addr, "deployment", ["--deployment", "green", "--identity", "matrix-green"]);
    await blue.waitFor("ready");
    await green.waitFor("ready");
    await producerPasses(run("producer", addr, "deployment"));
  }));

test("events", () =>
  scenario("events", async (addr, run) => {
    const p = run("producer", addr, "events");
    await p.waitFor("ready");
    run("worker", addr, "events", ["--identity", "matrix-events"]);
    await producerPasses(p);
  }));
