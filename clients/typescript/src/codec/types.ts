/**
 * The schemas of PROTOCOL.md section 4, in wire order, and the rewrites a writer applies for
 * a reader of an earlier version or one that did not list a feature (section 6).
 */
import { type Dialect, type Schema, option, struct, vec } from "./schema.js";

const str: Schema = "string";
const optStr = option("string");
const u32: Schema = "u32";
const u64: Schema = "u64";

const unitEnum = (name: string, names: readonly string[]): Schema => ({
  t: "enum",
  name,
  variants: names.map((n) => ({ name: n })),
});

export const Role = unitEnum("Role", ["Worker", "Producer", "Peer"]);

export const Limits = struct("Limits", [
  ["max_frame_len", u32],
  ["max_in_flight", u32],
  ["ping_interval_ms", u64],
  ["max_missed_pings", u32],
  ["max_name_len", u32],
  ["max_set_len", u32],
]);

export const HeaderLimits = struct("HeaderLimits", [
  ["max_headers", u32],
  ["max_header_bytes", u32],
]);

export const REFUSAL_CODES = [
  "VersionMismatch",
  "Unauthorized",
  "RoleNotSupported",
  "TooManyConnections",
  "Draining",
  "EmptyNamespaces",
  "EmptyActivityTypes",
  "ZeroCapacity",
  "InvalidField",
  "LimitExceeded",
  "Rejected",
  "Unsupported",
  "Superseded",
  "Cancelled",
  "SessionUnknown",
] as const;

export const RefusalCode: Schema = {
  t: "enum",
  name: "RefusalCode",
  variants: REFUSAL_CODES.map((n) => ({ name: n })),
  lower: (value, d) => {
    if (d.version < 4 && value === "SessionUnknown") return "Rejected";
    if (d.version < 3 && (value === "Unsupported" || value === "Superseded" || value === "Cancelled")) return "Rejected";
    return value;
  },
};

export const ERROR_CODES = [
  "Malformed",
  "Oversize",
  "UnknownFrameKind",
  "UnexpectedFrame",
  "HandshakeTimeout",
  "LivenessTimeout",
  "ZeroCapacity",
  "ShuttingDown",
  "LimitExceeded",
  "FrameTimeout",
  "SlowConsumer",
  "Unsupported",
] as const;

export const ErrorCode = unitEnum("ErrorCode", ERROR_CODES);

export const DispatchRequest = struct("DispatchRequest", [
  ["namespace", str],
  ["task_queue", str],
  ["activity_type", str],
  ["node", optStr],
  ["workflow_id", str],
  ["ordinal", u64],
  ["run_id", optStr],
  ["attempt", u32],
  ["input", "bytes"],
  ["deadline_unix_ms", option(u64)],
]);

export const Header = struct("Header", [
  ["name", str],
  ["value", str],
]);

export const Extension = struct("Extension", [
  ["tag", u32],
  ["critical", "bool"],
  ["value", "bytes"],
]);

export const RequestExtras = struct("RequestExtras", [
  ["headers", vec(Header)],
  ["priority", option("u8")],
  ["fairness_key", optStr],
  ["fairness_weight", option(u32)],
  ["deployment", optStr],
  ["extensions", vec(Extension)],
]);

export const ActivityOutcome: Schema = {
  t: "enum",
  name: "ActivityOutcome",
  variants: [
    { name: "Success", value: "bytes" },
    {
      name: "Failure",
      fields: [
        ["message", str],
        ["retryable", "bool"],
      ],
    },
  ],
};

export const DispatchResponse = struct("DispatchResponse", [
  ["workflow_id", str],
  ["ordinal", u64],
  ["run_id", optStr],
  ["outcome", ActivityOutcome],
]);

export const NodeRouting: Schema = {
  t: "enum",
  name: "NodeRouting",
  variants: [{ name: "Any" }, { name: "Pin", value: str }, { name: "Prefer", value: vec(str) }, { name: "Require", value: vec(str) }],
};

export const NO_WORKER_REASONS = [
  "PoolEmpty",
  "NoActivityMatch",
  "NodeFilterMatchedNobody",
  "AllAtCapacity",
  "AllExcluded",
  "AllUnreachable",
  "AllInProbation",
  "DeploymentMatchedNobody",
  "CapabilityMatchedNobody",
] as const;

/** A version-3 reason as a version-1 or version-2 reader gets it (section 4, `Census3`). */
function reasonForVersion2(reason: unknown): unknown {
  switch (reason) {
    case "AllUnreachable":
    case "AllInProbation":
      return "AllExcluded";
    case "DeploymentMatchedNobody":
    case "CapabilityMatchedNobody":
      return "NodeFilterMatchedNobody";
    default:
      return reason;
  }
}

export const NoWorkerReason: Schema = {
  t: "enum",
  name: "NoWorkerReason",
  variants: NO_WORKER_REASONS.map((n) => ({ name: n })),
  lower: (value, d) => (d.version < 3 ? reasonForVersion2(value) : value),
};

export const Census = struct("Census", [
  ["reason", NoWorkerReason],
  ["pool_workers", u32],
  ["serving_activity", u32],
  ["compatible_workers", u32],
  ["at_capacity", u32],
  ["excluded", u32],
  ["last_departure_ms_ago", option(u64)],
]);

export const Census3 = struct("Census3", [
  ["reason", NoWorkerReason],
  ["pool_workers", u32],
  ["serving_activity", u32],
  ["compatible_workers", u32],
  ["deployment_workers", u32],
  ["at_capacity", u32],
  ["draining", u32],
  ["probation", u32],
  ["unreachable", u32],
  ["last_departure_ms_ago", option(u64)],
]);

export const REFUSED_REASONS = [
  "InvalidRequest",
  "WorkerBackpressure",
  "TooManyInFlight",
  "DuplicateCorrelation",
  "NamespaceNotGranted",
  "Unsupported",
  "FairnessCapReached",
  "RoleNotGranted",
] as const;

export const RefusedReason: Schema = {
  t: "enum",
  name: "RefusedReason",
  variants: REFUSED_REASONS.map((n) => ({ name: n })),
  lower: (value, d) => lowerRefusedReason(value, d),
};

function lowerRefusedReason(value: unknown, d: Dialect): unknown {
  let v = value;
  if (v === "RoleNotGranted" && !(d.version >= 4 && d.listed.has("role-not-granted"))) v = "NamespaceNotGranted";
  if (d.version < 3 && v === "Unsupported") v = "InvalidRequest";
  if (d.version < 3 && v === "FairnessCapReached") v = "TooManyInFlight";
  if (d.version < 2 && v === "NamespaceNotGranted") v = "InvalidRequest";
  return v;
}

export const RefusedDispatch = struct("RefusedDispatch", [
  ["reason", RefusedReason],
  ["detail", str],
]);

export const DISPATCH_RESULTS = [
  "Completed",
  "NoWorker",
  "WorkerLost",
  "Timeout",
  "Refused",
  "Cancelled",
  "Draining",
  "PeerLost",
  "ShutDown",
  "NoWorker3",
  "HeartbeatTimeout",
] as const;

const workerAfter = [
  ["worker_id", u64],
  ["after_ms", u64],
] as const;

export const DispatchResult: Schema = {
  t: "enum",
  name: "DispatchResult",
  variants: [
    { name: "Completed", value: DispatchResponse },
    { name: "NoWorker", value: Census },
    { name: "WorkerLost", fields: [["worker_id", u64]] },
    { name: "Timeout", fields: workerAfter },
    { name: "Refused", value: RefusedDispatch },
    { name: "Cancelled" },
    { name: "Draining" },
    {
      name: "PeerLost",
      fields: [
        ["peer", str],
        ["after_ms", u64],
      ],
    },
    { name: "ShutDown", fields: [["after_ms", u64]] },
    { name: "NoWorker3", value: Census3 },
    { name: "HeartbeatTimeout", fields: workerAfter },
  ],
  lower: lowerDispatchResult,
};

/** The nearest result a reader of `d` knows (sections 4, 6 and 8). */
function lowerDispatchResult(value: unknown, d: Dialect): unknown {
  if (value === null || typeof value !== "object") return value;
  const v = value as Record<string, Record<string, unknown>>;
  if (v.HeartbeatTimeout && !(d.version >= 4 && d.listed.has("heartbeat-timeout"))) {
    return lowerDispatchResult({ Timeout: v.HeartbeatTimeout }, d);
  }
  if (v.NoWorker3 && d.version < 3) {
    const c = v.NoWorker3;
    return {
      NoWorker: {
        reason: c.reason,
        pool_workers: c.pool_workers,
        serving_activity: c.serving_activity,
        compatible_workers: c.deployment_workers,
        at_capacity: c.at_capacity,
        excluded: Number(c.draining) + Number(c.probation) + Number(c.unreachable),
        last_departure_ms_ago: c.last_departure_ms_ago,
      },
    };
  }
  if ((v.PeerLost || v.ShutDown) && d.version < 2) return { WorkerLost: { worker_id: 0 } };
  return value;
}

export const PeerAddress = struct("PeerAddress", [
  ["node_id", str],
  ["address", str],
]);

const u32s = (names: string[]) => names.map((n) => [n, u32] as const);

export const PresenceGroup = struct("PresenceGroup", [
  ["activity_type", str],
  ["node", optStr],
  ...u32s(["workers", "slots", "free", "full", "draining"]),
]);

export const PoolPresence = struct("PoolPresence", [
  ["channel", str],
  ["workers", u32],
  ["groups", vec(PresenceGroup)],
]);

export const PresenceGroup3 = struct("PresenceGroup3", [
  ["activity_type", str],
  ["node", optStr],
  ["deployment", optStr],
  ...u32s(["workers", "slots", "free", "full", "draining", "probation", "unreachable"]),
]);

export const PoolPresence3 = struct("PoolPresence3", [
  ["channel", str],
  ["workers", u32],
  ["groups", vec(PresenceGroup3)],
]);

export const WorkerStatus = struct("WorkerStatus", [
  ["worker_id", u64],
  ["pid", u64],
  ["identity", str],
  ["node", optStr],
  ["activity_types", vec(str)],
  ["max_concurrency", u32],
  ["in_flight", u32],
  ["draining", "bool"],
]);

export const PoolStatus = struct("PoolStatus", [
  ["namespace", str],
  ["task_queue", str],
  ["channel", str],
  ["workers", vec(WorkerStatus)],
]);

export const WaitingStatus = struct("WaitingStatus", [
  ["namespace", str],
  ["task_queue", str],
  ["activity_type", str],
  ["waiting", u32],
  ["census", Census],
]);

export const Counters = struct(
  "Counters",
  [
    "submitted",
    "pushed",
    "completed",
    "no_worker",
    "worker_lost",
    "timed_out",
    "refused",
    "cancelled",
    "draining",
    "late_replies",
    "dropped_replies",
    "reclaimed_slots",
  ].map((n) => [n, u64] as const),
);

export const NodeStatus = struct("NodeStatus", [
  ["node_id", str],
  ["uptime_ms", u64],
  ["connections", u32],
  ["draining", "bool"],
  ["pools", vec(PoolStatus)],
  ["waiting", vec(WaitingStatus)],
  ["counters", Counters],
]);

export const PeerLinkState = unitEnum("PeerLinkState", ["Connecting", "Up"]);

export const PeerStatus = struct("PeerStatus", [
  ["node_id", str],
  ["address", str],
  ["state", PeerLinkState],
  ["synced", "bool"],
  ["relays_sent", u64],
  ["relays_received", u64],
  ["relays_in_flight", u32],
  ["pools", vec(str)],
]);

export const EventTopic = unitEnum("EventTopic", ["Workers", "Peers"]);

export const WorkerEvent = struct("WorkerEvent", [
  ["worker_id", u64],
  ["identity", str],
  ["deployment", optStr],
  ["instance_id", optStr],
  ["channels", vec(str)],
]);

export const ExclusionReason = unitEnum("ExclusionReason", ["Unreachable", "Draining", "Probation"]);

export const DepartureReason = unitEnum("DepartureReason", [
  "Disconnected",
  "MissedPings",
  "Drained",
  "NodeShutdown",
  "RefusedAtRegistration",
  "Superseded",
  "ProtocolError",
]);

export const NodeEvent: Schema = {
  t: "enum",
  name: "NodeEvent",
  variants: [
    { name: "WorkerRegistered", value: WorkerEvent },
    {
      name: "WorkerExcluded",
      fields: [
        ["worker", WorkerEvent],
        ["reason", ExclusionReason],
      ],
    },
    { name: "WorkerRestored", value: WorkerEvent },
    {
      name: "WorkerDeparted",
      fields: [
        ["worker", WorkerEvent],
        ["reason", DepartureReason],
      ],
    },
    {
      name: "PeerUp",
      fields: [
        ["node_id", str],
        ["incarnation", u64],
        ["address", str],
      ],
    },
    {
      name: "PeerDown",
      fields: [
        ["node_id", str],
        ["incarnation", u64],
        ["reason", str],
      ],
    },
    { name: "Missed", fields: [["count", u64]] },
  ],
};

export const PoolSetting = struct("PoolSetting", [
  ["channel", str],
  ["current_deployment", optStr],
  ["set_at_unix_ms", u64],
  ["set_by", str],
]);

/** Extension tags of PROTOCOL.md section 4. */
export const TAG_HEARTBEAT_TIMEOUT = 1;
export const TAG_PROGRESS = 2;
export const TAG_LOST_LINK_TO = 3;
