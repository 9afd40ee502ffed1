export * from "./errors.js";
export * as codec from "./codec/index.js";
