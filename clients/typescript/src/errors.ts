/**
 * Typed errors of the SDK. Every error it throws or rejects with is a `LintelError` whose
 * `code` names the case; match on `code` (or `instanceof` a subclass), never on the message.
 */

/** What went wrong, one name per case a caller may act on. */
export type ErrorCode =
  /** A length prefix above the reader's maximum body length; nothing was allocated for it. */
  | "oversize"
  /** The stream ended in the middle of a frame. */
  | "truncated"
  /** Empty body, or a kind varint that is cut, overlong, over 5 bytes or above u32. */
  | "missing-kind"
  /** A canonical frame kind this codec does not know (47 or more). */
  | "unknown-kind"
  /** A known kind the connection's negotiated version does not allow. */
  | "kind-too-new"
  /** The body of a known kind does not decode. */
  | "malformed"
  /** An enum variant index this codec does not know (a newer node's variant). */
  | "unknown-variant"
  /** The body decoded with bytes left over. */
  | "trailing-bytes"
  /** A value that cannot be written (a number out of its type's range, a missing field). */
  | "encode"
  /** The node refused the hello or the registration. */
  | "refused"
  /** The node sent `Error{code, reason}` and closed. */
  | "node-error"
  /** The connection closed or failed before the answer came. */
  | "connection-lost"
  /** No node could be reached. */
  | "unreachable"
  /** The handshake did not finish in time. */
  | "handshake-timeout"
  /** A status query or subscription had no answer from the node in time. */
  | "timeout"
  /** The client or worker was closed by its owner. */
  | "closed"
  /** A request the SDK checks before sending (limits, header names) is invalid. */
  | "invalid";

/** The base of every error the SDK raises. */
export class LintelError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string) {
    super(message);
    this.code = code;
    this.name = new.target.name;
  }
}

/** Bytes from the node that do not form a valid frame. */
export class DecodeError extends LintelError {}

/** A variant index the codec does not know, inside a body of a known kind. */
export class UnknownVariantError extends DecodeError {
  /** The enum type (`DispatchResult`, ...). */
  readonly type: string;
  /** The index read. */
  readonly index: number;
  constructor(type: string, index: number) {
    super("unknown-variant", `unknown ${type} variant ${index} (a newer node's variant)`);
    this.type = type;
    this.index = index;
  }
}

/** A value that cannot be encoded. */
export class EncodeError extends LintelError {
  constructor(message: string) {
    super("encode", message);
  }
}

/** The node refused a hello (`HelloRefused`), a registration (`RegisterRefused`) or a subscription. */
export class RefusedError extends LintelError {
  /** The refusal code's name (`VersionMismatch`, `Unauthorized`, `SessionUnknown`, ...). */
  readonly refusal: string;
  readonly reason: string;
  constructor(refusal: string, reason: string) {
    super("refused", `refused ${refusal}: ${reason}`);
    this.refusal = refusal;
    this.reason = reason;
  }
}

/** The node sent `Error{code, reason}`. */
export class NodeError extends LintelError {
  /** The error code's name (`Malformed`, `LivenessTimeout`, ...). */
  readonly errorCode: string;
  readonly reason: string;
  constructor(errorCode: string, reason: string) {
    super("node-error", `node error ${errorCode}: ${reason}`);
    this.errorCode = errorCode;
    this.reason = reason;
  }
}

/** The connection was lost before the answer arrived. */
export class ConnectionLostError extends LintelError {
  /** True when the submission was written, so the dispatch may have run. */
  readonly mayHaveRun: boolean;
  constructor(message: string, mayHaveRun = false, cause?: LintelError) {
    super("connection-lost", message);
    this.mayHaveRun = mayHaveRun;
    if (cause) this.cause = cause;
  }
}
