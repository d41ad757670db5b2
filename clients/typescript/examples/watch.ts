// A runnable Node example: follow a session's events and print each as one line of JSON.
//
//   npx tsx examples/watch.ts --server http://127.0.0.1:8080 --project acme --session chat-42 \
//     [--token TOKEN] [--limit N]
//
// The events are printed in protobuf's canonical JSON, where int64 fields (seq, epoch,
// generation) are strings: JSON.stringify would throw on the bigint the client hands out.
import { toJsonString } from "@bufbuild/protobuf";
import { parseArgs } from "node:util";
import { SessionEventSchema, Turngate } from "../src/index.js";
import { createTurngateNodeTransport } from "../src/node.js";

const { values } = parseArgs({
  options: {
    server: { type: "string", default: "http://127.0.0.1:8080" },
    project: { type: "string", default: "default" },
    session: { type: "string" },
    token: { type: "string" },
    limit: { type: "string" },
  },
});
if (!values.session) {
  console.error("usage: watch.ts --session ID [--server URL] [--project ID] [--token TOKEN] [--limit N]");
  process.exit(2);
}

const transport = createTurngateNodeTransport({ baseUrl: values.server, token: values.token });
const turngate = new Turngate(transport, values.project);
const limit = values.limit === undefined ? Infinity : Number(values.limit);
const stop = new AbortController();
process.on("SIGINT", () => stop.abort());

let printed = 0;
try {
  for await (const event of turngate.watch(values.session, { signal: stop.signal })) {
    console.log(toJsonString(SessionEventSchema, event));
    if (++printed >= limit) break;
  }
} catch (error) {
  if (!stop.signal.aborted) {
    console.error(`the watch ended: ${error instanceof Error ? error.message : String(error)}`);
    process.exitCode = 1;
  }
}
