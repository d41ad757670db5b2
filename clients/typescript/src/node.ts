/** Node's own HTTP stack (connect-node): HTTP/1.1 or HTTP/2 (h2c, one connection for every call).
 * Import from "@turngate/client/node"; browsers use the main entry's createTurngateTransport. */
import type { Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { interceptorsOf, type TransportOptions } from "./transport.js";

export interface NodeTransportOptions extends TransportOptions {
  /** "1.1" (default) or "2". */
  httpVersion?: "1.1" | "2";
}

/** A connect-node transport to `options.baseUrl`. */
export function createTurngateNodeTransport(options: NodeTransportOptions): Transport {
  const common = {
    baseUrl: options.baseUrl,
    httpVersion: options.httpVersion ?? "1.1",
    interceptors: interceptorsOf(options),
  };
  return options.protocol === "grpc-web"
    ? createGrpcWebTransport({ ...common, useBinaryFormat: true })
    : createConnectTransport({ ...common, useBinaryFormat: options.binary ?? false });
}
