/**
 * The feature-matrix agent (not part of the package's API): plays a worker or a producer of
 * one scenario of the shared contract against the node at `--addr`, printing its progress
 * lines on stdout. Exit 0 on pass, 1 on fail, 3 when unsupported.
 *
 *   node dist/matrix/agent.js worker|producer --addr HOST:PORT --scenario NAME [--deployment D] [--identity ID]
 */
import { createInterface } from "node:readline";
import { Client, Worker, type DispatchResult, type Request } from "../index.js";

const say = (line: string) => process.stdout.write(line + "\n");

function parse(argv: string[]) {
  const [role, ...rest] = argv;
  const opts: Record<string, string> = {};
  for (let i = 0; i < rest.length; i += 2) {
    const k = rest[i];
    const v = rest[i + 1];
    if (!k?.startsWith("--") || v === undefined) throw new Error(`bad argument ${k}`);
    opts[k.slice(2)] = v;
  }
  if (role !== "worker" && role !== "producer") throw new Error("role is worker or producer");
  if (!opts.addr || !opts.scenario) throw new Error("--addr and --scenario are required");
  return { role, addr: opts.addr, scenario: opts.scenario, deployment: opts.deployment, identity: opts.identity };
}

const SCENARIOS = ["echo", "no-worker", "worker-lost", "timeout", "cancel", "drain", "headers", "deployment", "events", "heartbeat"];
const NS = "matrix";
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function hang(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    signal.addEventListener("abort", () => reject(signal.reason), { once: true });
  });
}

async function worker(a: ReturnType<typeof parse>): Promise<number> {
  const scenario = a.scenario;
  const handler = async (r: Request): Promise<Uint8Array | string> => {
    switch (scenario) {
      case "echo":
        return r.input;
      case "worker-lost":
      case "timeout":
      case "cancel":
        say("started");
        r.signal.addEventListener("abort", () => say("cancelled"), { once: true });
        return hang(r.signal);
      case "drain":
        say("started");
        await sleep(500);
        return r.input;
      case "headers":
        return [...r.headers]
          .sort((x, y) => (x.name < y.name ? -1 : x.name > y.name ? 1 : 0))
          .map((h) => `${h.name}=${h.value}\n`)
          .join("");
      case "deployment":
        return a.deployment ?? "";
      case "heartbeat":
        for (const d of ["25", "50", "75"]) {
          r.heartbeat(d);
          await sleep(100);
        }
        return "done";
      default:
        return r.input;
    }
  };
  const w = new Worker({
    nodes: a.addr,
    namespaces: NS,
    activities: "run",
    taskQueue: scenario,
    identity: a.identity ?? `ts-matrix-${scenario}`,
    deployment: a.deployment,
    concurrency: 4,
    // SIGTERM drains through the SDK's own signal handling.
    drainOnSignals: true,
    handler,
  });
  let draining = false;
  w.once("drained", () => {
    draining = true;
    say("drained");
    process.exit(0);
  });
  await w.registered();
  say("ready");
  // A worker runs until the runner stops it (killed, or SIGTERM for a drain), within 30 s.
  await sleep(28000);
  if (!draining) await w.close("matrix agent done");
  return 0;
}

function expect(cond: boolean, why: string): void {
  if (!cond) throw new Error(why);
}

function describe(r: DispatchResult): string {
  if (r.kind === "completed") {
    return r.outcome.kind === "success" ? `completed success ${JSON.stringify(r.outcome.text())}` : `completed failure ${r.outcome.message}`;
  }
  return JSON.stringify(r, (_k, v) => (typeof v === "bigint" ? v.toString() : v));
}

async function success(r: DispatchResult, want: string): Promise<void> {
  expect(r.kind === "completed" && r.outcome.kind === "success" && r.outcome.text() === want, `expected success ${JSON.stringify(want)}, got ${describe(r)}`);
}

async function producer(a: ReturnType<typeof parse>): Promise<number> {
  const client = await Client.connect({ nodes: a.addr, name: "ts-matrix-producer" });
  const s = a.scenario;
  const base = { taskQueue: s, waitForWorkerMs: 5000, retry: false as const };
  switch (s) {
    case "echo":
      await success(await client.dispatch(NS, "run", "matrix-echo", base), "matrix-echo");
      break;
    case "no-worker": {
      const r = await client.dispatch(NS, "run", "x", { taskQueue: "no-worker", waitForWorkerMs: 0, retry: false });
      expect(r.kind === "no-worker", `expected no-worker, got ${describe(r)}`);
      if (r.kind === "no-worker") expect(r.census.reason === "PoolEmpty", `expected reason PoolEmpty, got ${r.census.reason}`);
      break;
    }
    case "worker-lost": {
      const r = await client.dispatch(NS, "run", "x", { ...base, replyTimeoutMs: 20000 });
      expect(r.kind === "worker-lost", `expected worker-lost, got ${describe(r)}`);
      break;
    }
    case "timeout": {
      const r = await client.dispatch(NS, "run", "x", { ...base, replyTimeoutMs: 500 });
      expect(r.kind === "timeout", `expected timeout, got ${describe(r)}`);
      break;
    }
    case "cancel": {
      const controller = new AbortController();
      const pending = client.dispatch(NS, "run", "x", { ...base, replyTimeoutMs: 20000, signal: controller.signal });
      say("ready");
      const lines = createInterface({ input: process.stdin });
      for await (const line of lines) {
        if (line.trim() === "go") break;
      }
      lines.close();
      controller.abort();
      try {
        const r = await pending;
        throw new Error(`expected the dispatch cancelled, got ${describe(r)}`);
      } catch (err) {
        expect((err as Error).name === "AbortError", `expected AbortError, got ${String(err)}`);
      }
      break;
    }
    case "drain":
      await success(await client.dispatch(NS, "run", "matrix-drain", { ...base, replyTimeoutMs: 10000 }), "matrix-drain");
      break;
    case "headers": {
      const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
      const r = await client.dispatch(NS, "run", "x", { ...base, headers: { "x-matrix": "one", "x-tenant": "acme" }, traceparent: tp });
      await success(r, `traceparent=${tp}\nx-matrix=one\nx-tenant=acme\n`);
      break;
    }
    case "deployment":
      await success(await client.dispatch(NS, "run", "x", { ...base, deployment: "green" }), "green");
      await success(await client.dispatch(NS, "run", "x", { ...base, deployment: "blue" }), "blue");
      break;
    case "events": {
      const sub = await client.subscribe(["workers"]);
      say("ready");
      const seen = (async () => {
        for await (const e of sub) {
          if (e.event.kind === "worker-registered" && e.event.worker.identity === "matrix-events") return true;
        }
        return false;
      })();
      const timer = sleep(10000).then(() => false);
      expect(await Promise.race([seen, timer]), "no worker-registered event for matrix-events within 10 s");
      sub.close();
      break;
    }
    case "heartbeat": {
      const details: string[] = [];
      const r = await client.dispatch(NS, "run", "x", {
        ...base,
        heartbeatTimeoutMs: 2000,
        onProgress: (d) => details.push(new TextDecoder().decode(d)),
      });
      await success(r, "done");
      expect(JSON.stringify(details) === JSON.stringify(["25", "50", "75"]), `expected progress 25, 50, 75, got ${JSON.stringify(details)}`);
      break;
    }
  }
  client.close();
  return 0;
}

async function main(): Promise<number> {
  let a: ReturnType<typeof parse>;
  try {
    a = parse(process.argv.slice(2));
  } catch (err) {
    say(`fail: ${(err as Error).message}`);
    return 1;
  }
  if (!SCENARIOS.includes(a.scenario)) {
    say(`unsupported: scenario ${a.scenario}`);
    return 3;
  }
  const deadline = setTimeout(() => {
    say(a.role === "producer" ? "fail: no answer within 29 s" : "fail: worker still running after 29 s");
    process.exit(1);
  }, 29000);
  deadline.unref();
  try {
    const code = a.role === "worker" ? await worker(a) : await producer(a);
    if (a.role === "producer") say("pass");
    return code;
  } catch (err) {
    say(`fail: ${(err as Error).message.replace(/\n/g, " ")}`);
    return 1;
  }
}

main().then((code) => process.exit(code));
