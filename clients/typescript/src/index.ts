export * from "./errors.js";
export * as codec from "./codec/index.js";
export { Worker, failure, Failure, type WorkerOptions, type Handler, type Request, type RequestHeader } from "./worker/worker.js";
export { Connection, type TlsOptions, type Welcome, type Limits } from "./connection.js";
export { Client, type ClientOptions, type DispatchOptions, type RetryPolicy, type Subscription, type Watched } from "./client/client.js";
export type { DispatchResult, Outcome, ActivityOutcome, Census, Event, NodeEvent, WorkerInfo, RetryReason } from "./client/results.js";
