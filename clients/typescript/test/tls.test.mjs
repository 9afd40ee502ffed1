// TLS and mutual TLS against a real node, with certificates made by openssl for the test.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client, Worker } from "../dist/index.js";
import { startNode } from "./helpers.mjs";

/** A CA, a node certificate for localhost and 127.0.0.1, and a client certificate, in a fresh directory. */
function certificates() {
  const dir = mkdtempSync(join(tmpdir(), "lintel-ts-tls-"));
  const ssl = (...args) => execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  ssl("req", "-x509", ...ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=lintel-test-ca");
  for (const [name, san] of [
    ["node", "DNS:localhost,IP:127.0.0.1"],
    ["client", "DNS:ts-client"],
  ]) {
    ssl("req", ...ec, "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", `/CN=${name}`);
    writeFileSync(join(dir, `${name}.ext`), `subjectAltName=${san}\n`);
    ssl("x509", "-req", "-in", `${name}.csr`, "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-out", `${name}.crt`, "-days", "2", "-extfile", `${name}.ext`);
  }
  const read = (f) => readFileSync(join(dir, f));
  return { dir, path: (f) => join(dir, f), ca: read("ca.crt"), cert: read("client.crt"), key: read("client.key") };
}

test("worker and producer speak TLS; an untrusted certificate and plaintext are refused", async () => {
  const c = certificates();
  const node = await startNode({ LINTEL_TLS_CERT: c.path("node.crt"), LINTEL_TLS_KEY: c.path("node.key") });
  const tls = { ca: c.ca, servername: "localhost" };
  const worker = new Worker({ nodes: node.addr, namespaces: "tls", activities: "echo", tls, handler: (r) => r.input });
  let client;
  try {
    await worker.registered();
    client = await Client.connect({ nodes: node.addr, tls });
    const r = await client.dispatch("tls", "echo", "over tls", { waitForWorkerMs: 5000 });
    assert.equal(r.kind, "completed");
    assert.equal(r.outcome.text(), "over tls");
    await assert.rejects(Client.connect({ nodes: node.addr, tls: {} }), (e) => e.code === "unreachable" && /certificate/.test(e.message));
    await assert.rejects(Client.connect({ nodes: node.addr, handshakeTimeoutMs: 2000 }), (e) => e.code === "unreachable");
  } finally {
    client?.close();
    await worker.close();
    await node.stop();
    rmSync(c.dir, { recursive: true, force: true });
  }
});

test("a node requiring client certificates takes one signed by its CA and refuses a client without", async () => {
  const c = certificates();
  const node = await startNode({
    LINTEL_TLS_CERT: c.path("node.crt"),
    LINTEL_TLS_KEY: c.path("node.key"),
    LINTEL_TLS_CLIENT_CA: c.path("ca.crt"),
  });
  let client;
  try {
    client = await Client.connect({ nodes: node.addr, tls: { ca: c.ca, cert: c.cert, key: c.key, servername: "localhost" } });
    const status = await client.status();
    assert.equal(typeof status.node_id, "string");
    await assert.rejects(Client.connect({ nodes: node.addr, tls: { ca: c.ca, servername: "localhost" }, handshakeTimeoutMs: 3000 }));
  } finally {
    client?.close();
    await node.stop();
    rmSync(c.dir, { recursive: true, force: true });
  }
});
