/**
 * The frame table of PROTOCOL.md section 3, declared once: each kind's number, name, the
 * version that introduced it and its body's fields in wire order.
 */
import { type Field, boundedBytes, option, vec } from "./schema.js";
import * as T from "./types.js";

export interface KindInfo {
  readonly kind: number;
  readonly name: string;
  /** The protocol version that introduced the kind. */
  readonly since: number;
  readonly fields: readonly Field[];
}

const u64 = "u64" as const;
const str = "string" as const;
const correlation: Field = ["correlation", u64];
const reason: Field = ["reason", str];
const refusal: readonly Field[] = [
  ["code", T.RefusalCode],
  ["reason", str],
];
const register: readonly Field[] = [
  ["namespaces", vec(str)],
  ["task_queue", str],
  ["node", option(str)],
  ["activity_types", vec(str)],
  ["identity", str],
  ["max_concurrency", "u32"],
];
const welcome: readonly Field[] = [
  ["version", "u16"],
  ["node_id", str],
  ["pid", u64],
  ["limits", T.Limits],
];
const peerHello: readonly Field[] = [
  ["node_id", str],
  ["incarnation", u64],
  ["advertise", str],
  ["peers", vec(T.PeerAddress)],
];
const presenceFlags: readonly Field[] = [
  ["reset", "bool"],
  ["synced", "bool"],
  ["draining", "bool"],
];
const extensions: Field = ["extensions", vec(T.Extension)];
/** Most correlations in a session frame (section 4, Worker sessions). */
export const MAX_SESSION_LIST = 65536;
/** Most bytes of a `Progress`'s details. */
export const MAX_PROGRESS_DETAILS = 4096;
const token = boundedBytes(16, 64);
const correlations = vec(u64, MAX_SESSION_LIST);

const table: readonly (readonly [string, number, readonly Field[]])[] = [
  ["Hello", 1, [["min_version", "u16"], ["max_version", "u16"], ["role", T.Role], ["name", str], ["auth_token", option(str)]]],
  ["Welcome", 1, welcome],
  ["HelloRefused", 1, refusal],
  ["Register", 1, register],
  ["Registered", 1, [["worker_id", u64]]],
  ["RegisterRefused", 1, refusal],
  ["CapacityUpdate", 1, [["max_concurrency", "u32"]]],
  ["Push", 1, [correlation, ["request", T.DispatchRequest]]],
  ["Reply", 1, [correlation, ["response", T.DispatchResponse]]],
  [
    "Submit",
    1,
    [correlation, ["request", T.DispatchRequest], ["wait_for_worker_ms", option(u64)], ["reply_timeout_ms", option(u64)], ["routing", T.NodeRouting]],
  ],
  ["Outcome", 1, [correlation, ["result", T.DispatchResult]]],
  ["Cancel", 1, [correlation]],
  ["Ping", 1, [["nonce", u64]]],
  ["Pong", 1, [["nonce", u64]]],
  ["Drain", 1, [["grace_ms", u64]]],
  ["Drained", 1, [["completed", u64]]],
  ["Goodbye", 1, [reason]],
  ["Error", 1, [["code", T.ErrorCode], reason]],
  ["StatusQuery", 1, [correlation]],
  ["Status", 1, [correlation, ["status", T.NodeStatus]]],
  ["PeerHello", 2, peerHello],
  ["Presence", 2, [...presenceFlags, ["pools", vec(T.PoolPresence)]]],
  ["Relay", 2, [correlation, ["request", T.DispatchRequest], ["routing", T.NodeRouting], ["reply_timeout_ms", u64]]],
  ["RelayOutcome", 2, [correlation, ["result", T.DispatchResult]]],
  ["ServedOutcome", 2, [correlation, ["served_by", str], ["result", T.DispatchResult]]],
  ["ClusterStatus", 2, [correlation, ["status", T.NodeStatus], ["peers", vec(T.PeerStatus)], ["peer_lost", u64]]],
  [
    "Submit3",
    3,
    [
      correlation,
      ["request", T.DispatchRequest],
      ["extras", T.RequestExtras],
      ["wait_for_worker_ms", option(u64)],
      ["reply_timeout_ms", option(u64)],
      ["routing", T.NodeRouting],
    ],
  ],
  ["Push3", 3, [correlation, ["request", T.DispatchRequest], ["extras", T.RequestExtras]]],
  [
    "Relay3",
    3,
    [correlation, ["request", T.DispatchRequest], ["extras", T.RequestExtras], ["routing", T.NodeRouting], ["reply_timeout_ms", u64]],
  ],
  ["Register3", 3, [...register, ["deployment", option(str)], ["instance_id", option(str)], extensions]],
  ["Welcome3", 3, [...welcome, ["header_limits", T.HeaderLimits], ["features", vec(str)]]],
  ["Presence3", 3, [...presenceFlags, ["pools", vec(T.PoolPresence3)], extensions]],
  ["PeerHello3", 3, [...peerHello, ["features", vec(str)], extensions]],
  ["Subscribe", 3, [correlation, ["topics", vec(T.EventTopic)]]],
  ["Event", 3, [correlation, ["seq", u64], ["at_unix_ms", u64], ["event", T.NodeEvent]]],
  ["SubscriptionEnded", 3, [correlation, ...refusal]],
  ["StatusDocument", 3, [correlation, ["json", "bytes"]]],
  ["Farewell", 3, [reason]],
  ["RelayAck", 3, [["below", u64], ["also", vec(u64)]]],
  ["Resume", 3, [["unanswered", vec(u64)], ["last", "bool"]]],
  ["Resumed", 3, [["handled_up_to", u64], ["running", vec(u64)], ["unknown", vec(u64)], ["last", "bool"]]],
  ["PoolSettings", 3, [["settings", vec(T.PoolSetting)]]],
  ["Features", 4, [["features", vec(str)], extensions]],
  ["Session", 4, [["token", token], ["resume_grace_ms", u64]]],
  ["ResumeSession", 4, [["token", token], ["holding", correlations]]],
  ["SessionResumed", 4, [["worker_id", u64], ["attached", correlations], ["unknown", correlations]]],
  ["Progress", 4, [correlation, ["details", boundedBytes(0, MAX_PROGRESS_DETAILS)]]],
];

/** Every kind, indexed by its number. */
export const KINDS: readonly KindInfo[] = table.map(([name, since, fields], kind) => ({ kind, name, since, fields }));

const BY_NAME = new Map(KINDS.map((k) => [k.name, k]));

/** The kind of a frame name, or undefined. */
export function kindOf(name: string): KindInfo | undefined {
  return BY_NAME.get(name);
}

/** The highest protocol version this codec speaks. */
export const PROTOCOL_VERSION = 4;
