// An echoing TypeScript-SDK worker of concurrency 256, for `lintel bench` as the producer.
//   node clients/typescript/bench/worker.js HOST:PORT [namespace] [activity]
import { Worker } from "../dist/index.js";

const [addr = "127.0.0.1:7400", namespace = "bench", activity = "echo"] = process.argv.slice(2);
const worker = new Worker({
  nodes: addr,
  namespaces: namespace,
  activities: activity,
  concurrency: 256,
  identity: "ts-bench-worker",
  drainOnSignals: true,
  handler: (request) => request.input,
});
await worker.registered();
process.stdout.write(`ready ${addr} ${namespace}/${activity}\n`);
