/** A write retried on blips with the same request (and so the same request id), as the Python
 * SDK's: a retry answers what an earlier attempt did. */
import { DEFAULT_BACKOFF, delayMs, sleep, type Backoff } from "./backoff.js";
import { mayHaveTakenEffect, toTurngateError, transient, WriteOutcomeUnknown } from "./errors.js";

export interface RetryOptions {
  signal?: AbortSignal;
  /** How long to keep retrying transient failures (default 30 s, as the Python SDK). */
  retryForMs?: number;
  backoff?: Backoff;
}

/** A write's options: how it is retried, and its idempotency key. */
export interface WriteOptions extends RetryOptions {
  /** Idempotency key; one is made when unset, and kept across retries. */
  requestId?: string;
}

/** `attempt()` until it answers or fails for good, retrying transient failures while the next
 * attempt would start within `retryForMs`. Failures are typed errors: when the retries run out
 * after an attempt that may have taken effect, a WriteOutcomeUnknown naming `requestId`, whatever
 * the later attempts said. */
export async function retrying<T>(attempt: () => Promise<T>, options: WriteOptions = {}): Promise<T> {
  const { signal, retryForMs = 30_000, backoff = DEFAULT_BACKOFF, requestId = "" } = options;
  const until = Date.now() + retryForMs;
  let uncertain = false;
  for (let n = 0; ; n++) {
    try {
      return await attempt();
    } catch (thrown) {
      const error = toTurngateError(thrown);
      uncertain ||= mayHaveTakenEffect(error);
      const delay = delayMs(backoff, n);
      if (!transient(error) || signal?.aborted || Date.now() + delay >= until) {
        throw uncertain && transient(error)
          ? new WriteOutcomeUnknown(error.cause, error.details, requestId)
          : error;
      }
      await sleep(delay, signal);
    }
  }
}

/** A fresh idempotency key. crypto.getRandomValues, unlike randomUUID, is there in browsers'
 * insecure contexts too (file://). */
export function newRequestId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}
