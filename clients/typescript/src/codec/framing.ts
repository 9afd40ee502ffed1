/**
 * Frames on a byte stream (PROTOCOL.md section 1): a 4-byte big-endian body length, then the
 * body, a kind varint and its fields. I/O-free: `encodeFrame` writes bytes, `FrameReader`
 * takes bytes as they arrive and gives whole frames, checking the length against the maximum
 * before it buffers the body.
 */
import { DecodeError, EncodeError } from "../errors.js";
import { Reader, Writer } from "./bytes.js";
import { KINDS, PROTOCOL_VERSION, kindOf } from "./frames.js";
import { type Dialect, decodeValue, encodeValue } from "./schema.js";

/** A frame: its name as in PROTOCOL.md section 3 and its body's fields by name. */
export interface Frame {
  readonly name: string;
  readonly body: Record<string, any>;
}

/** The node's default maximum body length, 4 MiB. */
export const DEFAULT_MAX_FRAME_LEN = 4194304;

/** A reader of every version that lists every feature: nothing is rewritten. */
export const LATEST: Dialect = {
  version: PROTOCOL_VERSION,
  listed: new Set(["heartbeat-timeout", "role-not-granted", "progress", "worker-resume"]),
};

/**
 * The complete frame, length prefix included, as written for a reader of `dialect`.
 * Throws `EncodeError` for a value out of its type or a body over `maxFrameLen`.
 */
export function encodeFrame(frame: Frame, dialect: Dialect = LATEST, maxFrameLen = DEFAULT_MAX_FRAME_LEN): Uint8Array {
  const info = kindOf(frame.name);
  if (info === undefined) throw new EncodeError(`unknown frame ${frame.name}`);
  const w = new Writer(64);
  w.raw(new Uint8Array(4));
  w.small("u32", info.kind);
  for (const [name, schema] of info.fields) {
    const value = frame.body[name];
    if (value === undefined && !(typeof schema === "object" && schema.t === "option")) {
      throw new EncodeError(`${frame.name}.${name}: missing`);
    }
    encodeValue(w, schema, value, dialect, `${frame.name}.${name}`);
  }
  const len = w.length - 4;
  if (len > maxFrameLen) throw new EncodeError(`${frame.name} body of ${len} bytes is over the maximum ${maxFrameLen}`);
  w.patchU32BE(0, len);
  return w.finish();
}

/**
 * Decodes one body (the bytes after the length prefix). `version` is the connection's
 * negotiated version (a kind it does not allow is `kind-too-new`), or undefined before the
 * welcome. Throws a `DecodeError` whose `code` names the fault; never anything else.
 */
export function decodeBody(body: Uint8Array, version?: number): Frame {
  const kind = readKind(body);
  const info = KINDS[kind.value];
  if (info === undefined) throw new DecodeError("unknown-kind", `unknown frame kind ${kind.value}`);
  if (version !== undefined && info.since > version) {
    throw new DecodeError("kind-too-new", `${info.name} (kind ${info.kind}) needs version ${info.since}, the connection speaks ${version}`);
  }
  const r = new Reader(body, kind.len);
  const out: Record<string, unknown> = {};
  try {
    for (const [name, schema] of info.fields) out[name] = decodeValue(r, schema);
  } catch (err) {
    if (err instanceof DecodeError) throw err;
    throw new DecodeError("malformed", `${info.name}: ${String(err)}`);
  }
  if (r.remaining !== 0) throw new DecodeError("trailing-bytes", `${info.name}: ${r.remaining} bytes left over`);
  return { name: info.name, body: out };
}

/** The frame kind varint: canonical, at most 5 bytes, within u32. */
function readKind(body: Uint8Array): { value: number; len: number } {
  let value = 0;
  for (let i = 0; i < 5; i++) {
    if (i >= body.length) throw new DecodeError("missing-kind", "body ends inside the kind varint");
    const b = body[i]!;
    if (i === 4 && b > 0x0f) throw new DecodeError("missing-kind", "kind varint above u32");
    value += (b & 0x7f) * 2 ** (7 * i);
    if ((b & 0x80) === 0) {
      if (i > 0 && b === 0) throw new DecodeError("missing-kind", "overlong kind varint");
      return { value, len: i + 1 };
    }
  }
  throw new DecodeError("missing-kind", "kind varint longer than 5 bytes");
}

/**
 * Splits a byte stream into frame bodies. `push` bytes as they arrive, then take bodies with
 * `next` until it gives `null`. A length over `maxFrameLen` throws `oversize` before any of the
 * body is held; `end` throws `truncated` when the stream stopped inside a frame.
 */
export class FrameReader {
  private buf: Uint8Array = new Uint8Array(0);
  private start = 0;

  constructor(public maxFrameLen = DEFAULT_MAX_FRAME_LEN) {}

  push(chunk: Uint8Array): void {
    if (this.start >= this.buf.length) {
      this.buf = chunk;
      this.start = 0;
      return;
    }
    const rest = this.buf.subarray(this.start);
    const next = new Uint8Array(rest.length + chunk.length);
    next.set(rest, 0);
    next.set(chunk, rest.length);
    this.buf = next;
    this.start = 0;
  }

  /** The next whole body, or null when more bytes are needed. */
  next(): Uint8Array | null {
    const avail = this.buf.length - this.start;
    if (avail < 4) return null;
    const b = this.buf;
    const s = this.start;
    const len = ((b[s]! << 24) >>> 0) + (b[s + 1]! << 16) + (b[s + 2]! << 8) + b[s + 3]!;
    if (len > this.maxFrameLen) {
      throw new DecodeError("oversize", `frame body of ${len} bytes is over the maximum ${this.maxFrameLen}`);
    }
    if (len === 0) throw new DecodeError("missing-kind", "empty frame body");
    if (avail < 4 + len) return null;
    const body = b.subarray(s + 4, s + 4 + len);
    this.start = s + 4 + len;
    return body;
  }

  /** Bytes held of a frame not yet whole. */
  get pending(): number {
    return this.buf.length - this.start;
  }

  /** The stream ended: throws `truncated` when it ended inside a frame. */
  end(): void {
    if (this.pending > 0) throw new DecodeError("truncated", `stream ended inside a frame (${this.pending} bytes held)`);
  }
}
