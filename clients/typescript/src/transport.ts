/** Transports to turngate's HTTP listener (`turngate serve --http-listen`), with the bearer token
 * on every call. This one uses fetch(): browsers, and Node 20+ too; `./node.js` has Node's. */
import type { Interceptor, Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";

/** A token, or a function giving the current one (e.g. a short-lived token refreshed elsewhere). */
export type TokenSource = string | (() => string | Promise<string>);

export interface TransportOptions {
  /** The HTTP listener, e.g. "http://127.0.0.1:8080" (a path prefix is kept). */
  baseUrl: string;
  /** Sent as `Authorization: Bearer <token>`; unset for a server without a tokens file. */
  token?: TokenSource;
  /** "connect" (default) or "grpc-web": the listener serves both. */
  protocol?: "connect" | "grpc-web";
  /** Protobuf binary instead of JSON (the default for "connect"; gRPC-Web is always binary). */
  binary?: boolean;
  /** More interceptors, run after the one adding the token. */
  interceptors?: Interceptor[];
}

/** An interceptor that sets `Authorization: Bearer <token>` on every request. */
export function bearerToken(token: TokenSource): Interceptor {
  return (next) => async (request) => {
    const value = typeof token === "string" ? token : await token();
    request.header.set("Authorization", `Bearer ${value}`);
    return next(request);
  };
}

/** The interceptors of `options`: the token's, then the caller's. */
export function interceptorsOf(options: TransportOptions): Interceptor[] {
  return [
    ...(options.token === undefined ? [] : [bearerToken(options.token)]),
    ...(options.interceptors ?? []),
  ];
}

/** A fetch()-based transport to `options.baseUrl`. */
export function createTurngateTransport(options: TransportOptions): Transport {
  const common = { baseUrl: options.baseUrl, interceptors: interceptorsOf(options) };
  return options.protocol === "grpc-web"
    ? createGrpcWebTransport({ ...common, useBinaryFormat: true })
    : createConnectTransport({ ...common, useBinaryFormat: options.binary ?? false });
}
