/**
 * Postcard's primitives over bytes: an I/O-free reader that checks every length against what
 * is left before allocating, and a growable writer. Varints are checked as PROTOCOL.md
 * section 2 says: at most 3/5/10 bytes for u16/u32/u64, the last byte bounded so the value
 * never overflows its type.
 */
import { DecodeError, EncodeError } from "../errors.js";

/** A u64 as read: a number when it is at most 2^53 - 1, else a bigint. */
export type U64 = number | bigint;

/** Width of an unsigned integer type: its most bytes and the largest last byte. */
const WIDTH = {
  u16: { bytes: 3, last: 0x03, max: 0xffff },
  u32: { bytes: 5, last: 0x0f, max: 0xffffffff },
} as const;

const TEXT_DECODER = new TextDecoder("utf-8", { fatal: true });
const TEXT_ENCODER = new TextEncoder();

export class Reader {
  private pos = 0;
  constructor(private readonly buf: Uint8Array, start = 0, private readonly end = buf.length) {
    this.pos = start;
  }

  get remaining(): number {
    return this.end - this.pos;
  }

  u8(): number {
    if (this.pos >= this.end) throw malformed("body ends inside a u8");
    return this.buf[this.pos++]!;
  }

  bool(): boolean {
    const b = this.u8();
    if (b === 0) return false;
    if (b === 1) return true;
    throw malformed(`bool byte ${b}`);
  }

  /** A u16 or u32 varint. */
  small(type: "u16" | "u32"): number {
    const { bytes, last } = WIDTH[type];
    let value = 0;
    for (let i = 0; i < bytes; i++) {
      if (this.pos >= this.end) throw malformed(`body ends inside a ${type} varint`);
      const b = this.buf[this.pos++]!;
      if (i === bytes - 1) {
        if (b > last) throw malformed(`${type} varint overflows`);
        return value + b * 2 ** (7 * i);
      }
      value += (b & 0x7f) * 2 ** (7 * i);
      if ((b & 0x80) === 0) return value;
    }
    throw malformed(`${type} varint too long`);
  }

  u64(): U64 {
    let value = 0;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw malformed("body ends inside a u64 varint");
      const b = this.buf[this.pos++]!;
      if (i >= 7) {
        // Past 49 bits: finish in bigint.
        return this.u64Big(BigInt(value), i, b);
      }
      value += (b & 0x7f) * 2 ** (7 * i);
      if ((b & 0x80) === 0) return value;
    }
    throw malformed("u64 varint too long");
  }

  private u64Big(acc: bigint, i: number, first: number): U64 {
    let value = acc;
    let b = first;
    for (;;) {
      if (i === 9) {
        if (b > 0x01) throw malformed("u64 varint overflows");
        value += BigInt(b) << BigInt(7 * i);
        return narrow(value);
      }
      value += BigInt(b & 0x7f) << BigInt(7 * i);
      if ((b & 0x80) === 0) return narrow(value);
      i++;
      if (this.pos >= this.end) throw malformed("body ends inside a u64 varint");
      b = this.buf[this.pos++]!;
    }
  }

  /** A length or count: a u64 varint that must not exceed what is left (each item takes a byte at least). */
  length(what: string): number {
    const n = this.u64();
    if (typeof n === "bigint" || n > this.remaining) {
      throw malformed(`${what} of ${n} exceeds the ${this.remaining} bytes left`);
    }
    return n;
  }

  bytes(n: number): Uint8Array {
    if (n > this.remaining) throw malformed("body ends inside bytes");
    const out = this.buf.slice(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }

  string(): string {
    const n = this.length("string length");
    const view = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    try {
      return TEXT_DECODER.decode(view);
    } catch {
      throw malformed("string is not UTF-8");
    }
  }
}

function narrow(value: bigint): U64 {
  return value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : value;
}

function malformed(message: string): DecodeError {
  return new DecodeError("malformed", message);
}

export class Writer {
  private buf: Uint8Array;
  private pos = 0;
  constructor(capacity = 256) {
    this.buf = new Uint8Array(capacity);
  }

  get length(): number {
    return this.pos;
  }

  private room(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    let cap = this.buf.length * 2;
    while (cap < this.pos + n) cap *= 2;
    const next = new Uint8Array(cap);
    next.set(this.buf.subarray(0, this.pos));
    this.buf = next;
  }

  u8(v: number): void {
    if (!Number.isInteger(v) || v < 0 || v > 0xff) throw new EncodeError(`u8 out of range: ${v}`);
    this.room(1);
    this.buf[this.pos++] = v;
  }

  bool(v: boolean): void {
    if (typeof v !== "boolean") throw new EncodeError(`not a bool: ${String(v)}`);
    this.u8(v ? 1 : 0);
  }

  small(type: "u16" | "u32", v: number): void {
    if (!Number.isInteger(v) || v < 0 || v > WIDTH[type].max) {
      throw new EncodeError(`${type} out of range: ${String(v)}`);
    }
    this.room(5);
    while (v >= 0x80) {
      this.buf[this.pos++] = (v % 0x80) | 0x80;
      v = Math.floor(v / 0x80);
    }
    this.buf[this.pos++] = v;
  }

  u64(v: U64): void {
    if (typeof v === "number") {
      if (!Number.isSafeInteger(v) || v < 0) throw new EncodeError(`u64 out of range: ${v}`);
      this.room(10);
      while (v >= 0x80) {
        this.buf[this.pos++] = (v % 0x80) | 0x80;
        v = Math.floor(v / 0x80);
      }
      this.buf[this.pos++] = v;
      return;
    }
    if (typeof v !== "bigint" || v < 0n || v > 0xffffffffffffffffn) {
      throw new EncodeError(`u64 out of range: ${String(v)}`);
    }
    this.room(10);
    while (v >= 0x80n) {
      this.buf[this.pos++] = Number(v & 0x7fn) | 0x80;
      v >>= 7n;
    }
    this.buf[this.pos++] = Number(v);
  }

  raw(bytes: Uint8Array): void {
    this.room(bytes.length);
    this.buf.set(bytes, this.pos);
    this.pos += bytes.length;
  }

  bytes(bytes: Uint8Array): void {
    if (!(bytes instanceof Uint8Array)) throw new EncodeError("bytes must be a Uint8Array");
    this.u64(bytes.length);
    this.raw(bytes);
  }

  string(s: string): void {
    if (typeof s !== "string") throw new EncodeError(`not a string: ${String(s)}`);
    const encoded = TEXT_ENCODER.encode(s);
    this.u64(encoded.length);
    this.raw(encoded);
  }

  /** Overwrites 4 bytes at `at` with `v`, big-endian (the frame's length prefix). */
  patchU32BE(at: number, v: number): void {
    this.buf[at] = (v >>> 24) & 0xff;
    this.buf[at + 1] = (v >>> 16) & 0xff;
    this.buf[at + 2] = (v >>> 8) & 0xff;
    this.buf[at + 3] = v & 0xff;
  }

  finish(): Uint8Array {
    return this.buf.subarray(0, this.pos);
  }
}
