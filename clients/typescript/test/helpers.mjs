// Shared by the tests: the repo's paths, the node binary, and a node started on an ephemeral port.
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const PACKAGE = dirname(dirname(fileURLToPath(import.meta.url)));
export const REPO = dirname(dirname(PACKAGE));

/** The hex of a frame: lowercase, no spaces. */
export const hex = (bytes) => Buffer.from(bytes).toString("hex");

/**
 * The test vectors: wire/vectors.json when it exists, else the hex dumps of PROTOCOL.md
 * section 12 (name and hex; version, listed and fields unknown there).
 */
export function vectors() {
  const file = join(REPO, "wire", "vectors.json");
  if (existsSync(file)) {
    const doc = JSON.parse(readFileSync(file, "utf8"));
    return { source: "wire/vectors.json", vectors: doc.vectors };
  }
  const doc = readFileSync(join(REPO, "wire", "PROTOCOL.md"), "utf8");
  const out = [];
  const re = /<!-- hex:([a-z0-9-]+) -->\s*```text\n([\s\S]*?)```/g;
  for (const m of doc.matchAll(re)) {
    out.push({ name: m[1], hex: m[2].replace(/\s+/g, "") });
  }
  return { source: "wire/PROTOCOL.md", vectors: out };
}

/** The lintel binary: LINTEL_BIN, else target/debug/lintel, else target/release/lintel. */
export function lintelBin() {
  const candidates = [process.env.LINTEL_BIN, join(REPO, "target", "debug", "lintel"), join(REPO, "target", "release", "lintel")];
  for (const c of candidates) if (c && existsSync(c)) return c;
  throw new Error(
    "no lintel binary: set LINTEL_BIN or build it with `cargo build --bin lintel` (looked at " + candidates.filter(Boolean).join(", ") + ")",
  );
}

/**
 * Starts `lintel serve` on 127.0.0.1:0 with `env` added, resolves once it printed its
 * address. Returns { addr, proc, stop() , exited }.
 */
export async function startNode(env = {}, args = []) {
  // The node refuses LINTEL_* variables it does not know, such as LINTEL_BIN.
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== "LINTEL_BIN"));
  const proc = spawn(lintelBin(), ["serve", "--listen", "127.0.0.1:0", ...args], {
    env: { ...base, LINTEL_LOG_FORMAT: "text", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const exited = new Promise((resolve) => proc.once("exit", (code, signal) => resolve({ code, signal })));
  let log = "";
  const addr = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("node did not print its address within 20 s:\n" + log)), 20000);
    const onData = (d) => {
      log += d.toString();
      const m = /listening addr=(\S+)/.exec(log);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    proc.stdout.on("data", onData);
    proc.stderr.on("data", onData);
    proc.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`node exited (${code}) before listening:\n${log}`));
    });
  });
  return {
    addr,
    proc,
    exited,
    log: () => log,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) {
        proc.kill("SIGKILL");
        await exited;
      }
    },
  };
}

/** Resolves `promise` or rejects after `ms` with `what`. */
export function within(ms, promise, what = "operation") {
  let timer;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} did not happen within ${ms} ms`)), ms);
    }),
  ]);
}

/** A promise and the function that resolves it, for a test to wait on an event it signals. */
export function deferred() {
  let resolve;
  const promise = new Promise((r) => (resolve = r));
  return { promise, resolve };
}
