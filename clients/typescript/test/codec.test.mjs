// The codec against the protocol's vectors, and what it does with hostile bytes.
import { test } from "node:test";
import assert from "node:assert/strict";
import { codec, DecodeError, LintelError, UnknownVariantError } from "../dist/index.js";
import { hex, vectors } from "./helpers.mjs";

const { decodeBody, encodeFrame, FrameReader, Reader, Writer, LATEST } = codec;

/** A decoded value as serde's JSON writes it: bytes as arrays of numbers, u64 as numbers. */
function jsonView(value) {
  if (value instanceof Uint8Array) return Array.from(value);
  if (typeof value === "bigint") return Number(value);
  if (Array.isArray(value)) return value.map(jsonView);
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, jsonView(v)]));
  }
  return value;
}

const dialectOf = (v) => {
  if (v.version !== undefined) return { version: v.version, listed: new Set(v.listed ?? []) };
  // PROTOCOL.md's dumps: "-unlisted" ones are written for a version-4 reader listing nothing.
  return v.name.endsWith("-unlisted") ? { version: 4, listed: new Set() } : LATEST;
};

test("every vector decodes, matches its fields and re-encodes byte for byte", () => {
  const { source, vectors: vs } = vectors();
  assert.ok(vs.length >= 50, `${source} holds ${vs.length} vectors`);
  const kinds = new Set();
  for (const v of vs) {
    const bytes = Buffer.from(v.hex, "hex");
    const frame = decodeBody(bytes.subarray(4), v.version);
    kinds.add(codec.kindOf(frame.name).kind);
    if (v.kind !== undefined) assert.equal(codec.kindOf(frame.name).kind, v.kind, v.name);
    if (v.frame !== undefined) assert.equal(frame.name, v.frame, v.name);
    if (v.fields !== undefined) assert.deepEqual(jsonView(frame.body), v.fields, v.name);
    assert.equal(hex(encodeFrame(frame, dialectOf(v))), v.hex, v.name);
  }
  // Peer frames are among them: the codec covers every kind the document shows.
  for (const k of [20, 21, 22, 23, 31, 32, 42, 43, 44, 45, 46]) assert.ok(kinds.has(k), `kind ${k} has a vector`);
});

test("the varints of PROTOCOL.md section 2 encode and decode canonically", () => {
  const table = [
    [0, "u16", "00"],
    [127, "u16", "7f"],
    [128, "u16", "8001"],
    [300, "u32", "ac02"],
    [1000, "u64", "e807"],
    [16384, "u16", "808001"],
    [65535, "u16", "ffff03"],
    [4194304, "u32", "80808002"],
    [4294967295, "u32", "ffffffff0f"],
    [1700000000000, "u64", "80d095ffbc31"],
    [18446744073709551615n, "u64", "ffffffffffffffffff01"],
  ];
  for (const [value, type, bytes] of table) {
    const w = new Writer();
    if (type === "u64") w.u64(value);
    else w.small(type, value);
    assert.equal(hex(w.finish()), bytes, `${value} as ${type}`);
    const r = new Reader(Buffer.from(bytes, "hex"));
    assert.equal(type === "u64" ? r.u64() : r.small(type), value);
  }
});

test("an overflowing or cut varint is malformed, not a wrong number", () => {
  const cases = [
    ["u16", "808004"],
    ["u16", "80808001"],
    ["u32", "ffffffff1f"],
    ["u64", "ffffffffffffffffff02"],
    ["u64", "ffffffffffffffffffff01"],
    ["u32", "ff"],
    ["u64", "8080"],
  ];
  for (const [type, bytes] of cases) {
    const r = new Reader(Buffer.from(bytes, "hex"));
    assert.throws(() => (type === "u64" ? r.u64() : r.small(type)), (e) => e instanceof DecodeError && e.code === "malformed", `${type} ${bytes}`);
  }
});

test("a length prefix over the maximum is oversize before any body is held", () => {
  const reader = new FrameReader(1024);
  reader.push(Buffer.from("7fffffff", "hex"));
  assert.throws(() => reader.next(), (e) => e instanceof DecodeError && e.code === "oversize");
  // The limit is the negotiated one: 1025 is over 1024.
  const r2 = new FrameReader(1024);
  r2.push(Buffer.from("00000401", "hex"));
  assert.throws(() => r2.next(), (e) => e.code === "oversize");
});

test("a stream ending inside a frame is truncated; frames split anywhere reassemble", () => {
  const frame = encodeFrame({ name: "Ping", body: { nonce: 300 } });
  const reader = new FrameReader();
  for (const b of frame.subarray(0, frame.length - 1)) {
    reader.push(Uint8Array.of(b));
    assert.equal(reader.next(), null);
  }
  assert.throws(() => reader.end(), (e) => e.code === "truncated");
  reader.push(frame.subarray(frame.length - 1));
  const body = reader.next();
  assert.deepEqual(decodeBody(body), { name: "Ping", body: { nonce: 300 } });
  reader.end();
  // Two frames in one chunk.
  const two = Buffer.concat([frame, encodeFrame({ name: "Pong", body: { nonce: 1 } })]);
  reader.push(two);
  assert.equal(decodeBody(reader.next()).name, "Ping");
  assert.equal(decodeBody(reader.next()).name, "Pong");
  assert.equal(reader.next(), null);
});

test("a bad kind is named: missing, overlong, unknown, too new for the version", () => {
  const code = (bodyHex, version) => {
    try {
      decodeBody(Buffer.from(bodyHex, "hex"), version);
    } catch (e) {
      assert.ok(e instanceof DecodeError);
      return e.code;
    }
    return "ok";
  };
  assert.equal(code(""), "missing-kind");
  assert.equal(code("80"), "missing-kind");
  assert.equal(code("8c00"), "missing-kind");
  assert.equal(code("ffffffff7f"), "missing-kind");
  assert.equal(code("808080808001"), "missing-kind");
  assert.equal(code("2f"), "unknown-kind");
  assert.equal(code("2e0100", 3), "kind-too-new");
  assert.equal(code("1400", 1), "kind-too-new");
  assert.equal(code("0c01"), "ok");
  assert.equal(code("0c0100"), "trailing-bytes");
  assert.equal(code("0c"), "malformed");
});

test("bodies out of their bounds are malformed: bool, option tag, session token, progress details, UTF-8", () => {
  const bad = [
    // Welcome3 needs more; Presence with bool 2.
    "150200000000",
    // Hello with option tag 2.
    "000101000002",
    // Session with a 15-byte token.
    "2b0f" + "00".repeat(15) + "00",
    // Progress with 4097 bytes of details.
    "2e01812000" + "00".repeat(4096),
    // Goodbye with invalid UTF-8.
    "1001ff",
    // A vec count beyond the bytes left.
    "27ffffffff0f00",
  ];
  for (const b of bad) {
    assert.throws(() => decodeBody(Buffer.from(b, "hex")), (e) => e instanceof DecodeError && e.code === "malformed", b);
  }
});

test("an outcome variant from a newer node is a typed unknown-variant error, the correlation still readable", () => {
  // ServedOutcome { correlation: 9, served_by: "n", result: <variant 11> }
  const body = Buffer.from("18" + "09" + "016e" + "0b", "hex");
  assert.throws(
    () => decodeBody(body),
    (e) => e instanceof UnknownVariantError && e.code === "unknown-variant" && e.type === "DispatchResult" && e.index === 11,
  );
  assert.equal(new Reader(body, 1).u64(), 9);
});

test("random and mutated bytes only ever give a typed error or a frame that re-encodes", () => {
  const { vectors: vs } = vectors();
  let seed = 42;
  const rand = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff), seed);
  for (let i = 0; i < 20000; i++) {
    const base = Buffer.from(vs[i % vs.length].hex, "hex").subarray(4);
    const body = Buffer.from(base);
    const flips = 1 + (rand() % 3);
    for (let f = 0; f < flips; f++) body[rand() % body.length] = rand() & 0xff;
    const cut = rand() % 4 === 0 ? body.subarray(0, rand() % body.length) : body;
    try {
      const frame = decodeBody(cut);
      encodeFrame(frame, LATEST, Number.MAX_SAFE_INTEGER);
    } catch (e) {
      assert.ok(e instanceof LintelError, `non-typed error ${e} on ${hex(cut)}`);
    }
  }
});

test("a version-4 outcome goes to a reader that did not list it as the nearest it knows", () => {
  const frame = { name: "ServedOutcome", body: { correlation: 5, served_by: "node-a", result: { HeartbeatTimeout: { worker_id: 42, after_ms: 31000 } } } };
  const listed = decodeBody(encodeFrame(frame).subarray(4));
  assert.deepEqual(listed.body.result, { HeartbeatTimeout: { worker_id: 42, after_ms: 31000 } });
  const unlisted = decodeBody(encodeFrame(frame, { version: 4, listed: new Set() }).subarray(4));
  assert.deepEqual(unlisted.body.result, { Timeout: { worker_id: 42, after_ms: 31000 } });
  const census = { reason: "AllInProbation", pool_workers: 2, serving_activity: 2, compatible_workers: 2, deployment_workers: 2, at_capacity: 0, draining: 0, probation: 1, unreachable: 1, last_departure_ms_ago: null };
  const v2 = decodeBody(encodeFrame({ name: "ServedOutcome", body: { correlation: 1, served_by: "n", result: { NoWorker3: census } } }, { version: 2, listed: new Set() }).subarray(4));
  assert.deepEqual(v2.body.result, { NoWorker: { reason: "AllExcluded", pool_workers: 2, serving_activity: 2, compatible_workers: 2, at_capacity: 0, excluded: 2, last_departure_ms_ago: null } });
});
