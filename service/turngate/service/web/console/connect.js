// The Connect protocol's JSON form over fetch: unary calls and server streams (enveloped).
// https://connectrpc.com/docs/protocol — the only module that knows the wire format.

const PREFIX = "/turngate.v1.";
const END_STREAM = 0x02;
const HEADER_BYTES = 5;

// A Connect error: `code` is the protocol's lower_snake_case code ("unavailable", ...).
export class ConnectError extends Error {
  constructor(code, message, details = []) {
    super(message || code);
    this.code = code;
    this.details = details;
  }
}

// The reason of an error's google.rpc.ErrorInfo detail ("" without one): the message's field 1,
// read from its protobuf bytes (unpadded base64 in Connect's JSON), as `debug` may be absent.
export function errorReason(error) {
  const info = (error.details || []).find((detail) => detail.type === "google.rpc.ErrorInfo");
  if (!info) return "";
  if (info.debug && info.debug.reason) return info.debug.reason;
  const base64 = info.value || "";
  const bytes = Uint8Array.from(atob(base64.padEnd(Math.ceil(base64.length / 4) * 4, "=")),
    (char) => char.charCodeAt(0));
  if (bytes[0] !== 0x0a) return "";  // field 1, length-delimited: first when set
  let length = 0;
  let at = 1;
  for (let shift = 0; ; shift += 7) {  // its length: a varint
    const byte = bytes[at++];
    length |= (byte & 0x7f) << shift;
    if (!(byte & 0x80)) break;
  }
  return new TextDecoder().decode(bytes.subarray(at, at + length));
}

function headers(contentType, token) {
  const result = { "Content-Type": contentType, "Connect-Protocol-Version": "1" };
  if (token) result.Authorization = `Bearer ${token}`;
  return result;
}

// What a failed HTTP response says: the Connect error JSON when there is one.
async function errorOf(response) {
  let body = {};
  try {
    body = await response.json();
  } catch {
    // Not JSON (a proxy's page): the status alone says what happened.
  }
  return new ConnectError(body.code || `http_${response.status}`, body.message || response.statusText,
    body.details || []);
}

// The answer of one POST to an RPC, once it says it succeeded.
async function post(service, method, contentType, body, { token = "", signal } = {}) {
  const response = await fetch(PREFIX + service + "/" + method, {
    method: "POST",
    headers: headers(contentType, token),
    body,
    signal,
  });
  if (!response.ok) throw await errorOf(response);
  return response;
}

export async function unary(service, method, request, options) {
  const response = await post(service, method, "application/json", JSON.stringify(request), options);
  return response.json();
}

function envelope(message) {
  const json = new TextEncoder().encode(JSON.stringify(message));
  const framed = new Uint8Array(HEADER_BYTES + json.length);
  new DataView(framed.buffer).setUint32(1, json.length);
  framed.set(json, HEADER_BYTES);
  return framed;
}

// Resolves once the server has answered, to an iterator of the stream's messages; the iterator
// throws ConnectError when the stream ends with an error, and whatever fetch throws when the
// connection is lost.
export async function serverStream(service, method, request, options) {
  const response = await post(service, method, "application/connect+json", envelope(request), options);
  return messages(response.body.getReader());
}

async function* messages(reader) {
  const decoder = new TextDecoder();
  let buffered = new Uint8Array(0);
  for (;;) {
    while (buffered.length >= HEADER_BYTES) {
      const view = new DataView(buffered.buffer, buffered.byteOffset, buffered.length);
      const flags = view.getUint8(0);
      const length = view.getUint32(1);
      if (buffered.length < HEADER_BYTES + length) break;
      const message = JSON.parse(decoder.decode(buffered.subarray(HEADER_BYTES, HEADER_BYTES + length)));
      buffered = buffered.slice(HEADER_BYTES + length);
      if (flags & END_STREAM) {
        if (message.error) {
          const { code, message: text, details } = message.error;
          throw new ConnectError(code || "unknown", text, details || []);
        }
        return;
      }
      yield message;
    }
    const { value, done } = await reader.read();
    if (done) throw new ConnectError("unavailable", "the stream ended without its end message");
    const joined = new Uint8Array(buffered.length + value.length);
    joined.set(buffered);
    joined.set(value, buffered.length);
    buffered = joined;
  }
}
