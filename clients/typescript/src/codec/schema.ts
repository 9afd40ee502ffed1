/**
 * A schema-driven postcard codec: a type is a value of `Schema`, and one encoder and one
 * decoder walk it. Values are shaped as serde's JSON of the Rust types: a struct is an object
 * keyed by field name, `Option` is `null` or the value, a unit variant is its name (`"Any"`),
 * a variant with data `{ Name: value }` (newtype) or `{ Name: { fields } }` (struct variant),
 * `bytes` a `Uint8Array`, a u64 a number (a bigint above 2^53 - 1).
 */
import { DecodeError, EncodeError, UnknownVariantError } from "../errors.js";
import { Reader, Writer } from "./bytes.js";

/** What the reader of an encoding understands: its negotiated version and listed features. */
export interface Dialect {
  version: number;
  listed: ReadonlySet<string>;
}

export type Field = readonly [name: string, schema: Schema];

export interface Variant {
  readonly name: string;
  /** A newtype variant's one value. */
  readonly value?: Schema;
  /** A struct variant's fields. */
  readonly fields?: readonly Field[];
}

export type Schema =
  | "u8"
  | "u16"
  | "u32"
  | "u64"
  | "bool"
  | "string"
  | "bytes"
  | { readonly t: "bytes"; readonly min: number; readonly max: number }
  | { readonly t: "option"; readonly of: Schema }
  | { readonly t: "vec"; readonly of: Schema; readonly max?: number }
  | { readonly t: "struct"; readonly name: string; readonly fields: readonly Field[] }
  | {
      readonly t: "enum";
      readonly name: string;
      readonly variants: readonly Variant[];
      /** Rewrites a value for a reader that does not know it (PROTOCOL.md section 6). */
      readonly lower?: (value: unknown, dialect: Dialect) => unknown;
    };

export const option = (of: Schema): Schema => ({ t: "option", of });
export const vec = (of: Schema, max?: number): Schema => (max === undefined ? { t: "vec", of } : { t: "vec", of, max });
export const struct = (name: string, fields: readonly Field[]) => ({ t: "struct", name, fields }) as const;
export const boundedBytes = (min: number, max: number): Schema => ({ t: "bytes", min, max });

export function encodeValue(w: Writer, schema: Schema, value: unknown, dialect: Dialect, path: string): void {
  switch (schema) {
    case "u8":
      return w.u8(value as number);
    case "u16":
    case "u32":
      return w.small(schema, value as number);
    case "u64":
      return w.u64(value as number);
    case "bool":
      return w.bool(value as boolean);
    case "string":
      return w.string(value as string);
    case "bytes":
      return w.bytes(value as Uint8Array);
  }
  switch (schema.t) {
    case "bytes": {
      const b = value as Uint8Array;
      if (!(b instanceof Uint8Array) || b.length < schema.min || b.length > schema.max) {
        throw new EncodeError(`${path}: bytes of ${schema.min} to ${schema.max} expected`);
      }
      return w.bytes(b);
    }
    case "option":
      if (value === null || value === undefined) return w.u8(0);
      w.u8(1);
      return encodeValue(w, schema.of, value, dialect, path);
    case "vec": {
      if (!Array.isArray(value)) throw new EncodeError(`${path}: an array expected`);
      if (schema.max !== undefined && value.length > schema.max) {
        throw new EncodeError(`${path}: at most ${schema.max} items`);
      }
      w.u64(value.length);
      for (let i = 0; i < value.length; i++) encodeValue(w, schema.of, value[i], dialect, path);
      return;
    }
    case "struct": {
      if (value === null || typeof value !== "object") throw new EncodeError(`${path}: ${schema.name} object expected`);
      const obj = value as Record<string, unknown>;
      for (const [name, fs] of schema.fields) {
        const v = obj[name];
        if (v === undefined && !(typeof fs === "object" && fs.t === "option")) {
          throw new EncodeError(`${path}.${name}: missing`);
        }
        encodeValue(w, fs, v, dialect, `${path}.${name}`);
      }
      return;
    }
    case "enum": {
      const lowered = schema.lower ? schema.lower(value, dialect) : value;
      let name: string;
      let payload: unknown;
      if (typeof lowered === "string") {
        name = lowered;
      } else if (lowered !== null && typeof lowered === "object") {
        const keys = Object.keys(lowered);
        if (keys.length !== 1) throw new EncodeError(`${path}: ${schema.name} needs one variant key`);
        name = keys[0]!;
        payload = (lowered as Record<string, unknown>)[name];
      } else {
        throw new EncodeError(`${path}: ${schema.name} expected`);
      }
      const index = schema.variants.findIndex((v) => v.name === name);
      if (index < 0) throw new EncodeError(`${path}: ${schema.name} has no variant ${name}`);
      const variant = schema.variants[index]!;
      w.small("u32", index);
      if (variant.value !== undefined) {
        encodeValue(w, variant.value, payload, dialect, `${path}.${name}`);
      } else if (variant.fields !== undefined) {
        encodeValue(w, { t: "struct", name, fields: variant.fields }, payload, dialect, `${path}.${name}`);
      }
      return;
    }
  }
}

export function decodeValue(r: Reader, schema: Schema): unknown {
  switch (schema) {
    case "u8":
      return r.u8();
    case "u16":
    case "u32":
      return r.small(schema);
    case "u64":
      return r.u64();
    case "bool":
      return r.bool();
    case "string":
      return r.string();
    case "bytes":
      return r.bytes(r.length("bytes length"));
  }
  switch (schema.t) {
    case "bytes": {
      const n = r.length("bytes length");
      if (n < schema.min || n > schema.max) {
        throw new DecodeError("malformed", `bytes of ${n}, outside ${schema.min} to ${schema.max}`);
      }
      return r.bytes(n);
    }
    case "option": {
      const tag = r.u8();
      if (tag === 0) return null;
      if (tag === 1) return decodeValue(r, schema.of);
      throw new DecodeError("malformed", `option tag ${tag}`);
    }
    case "vec": {
      const n = r.length("vec count");
      if (schema.max !== undefined && n > schema.max) {
        throw new DecodeError("malformed", `vec of ${n} over its bound ${schema.max}`);
      }
      const out = new Array<unknown>(n);
      for (let i = 0; i < n; i++) out[i] = decodeValue(r, schema.of);
      return out;
    }
    case "struct": {
      const out: Record<string, unknown> = {};
      for (const [name, fs] of schema.fields) out[name] = decodeValue(r, fs);
      return out;
    }
    case "enum": {
      const index = r.small("u32");
      const variant = schema.variants[index];
      if (variant === undefined) throw new UnknownVariantError(schema.name, index);
      if (variant.value !== undefined) return { [variant.name]: decodeValue(r, variant.value) };
      if (variant.fields !== undefined) {
        return { [variant.name]: decodeValue(r, { t: "struct", name: variant.name, fields: variant.fields }) };
      }
      return variant.name;
    }
  }
}
