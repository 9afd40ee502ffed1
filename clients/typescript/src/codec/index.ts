/** Codec of the lintel wire protocol: frames, their schemas and the framing of a byte stream. */
export { Reader, Writer, type U64 } from "./bytes.js";
export { KINDS, PROTOCOL_VERSION, MAX_PROGRESS_DETAILS, MAX_SESSION_LIST, kindOf, type KindInfo } from "./frames.js";
export { DEFAULT_MAX_FRAME_LEN, FrameReader, LATEST, decodeBody, encodeFrame, type Frame } from "./framing.js";
export { type Dialect, type Schema, decodeValue, encodeValue } from "./schema.js";
export * as types from "./types.js";
