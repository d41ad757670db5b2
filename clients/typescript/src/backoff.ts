/** Delays between attempts, as the Python SDK's: the n-th drawn uniformly from [cap/2, cap] with
 * cap = min(maxMs, initialMs * 2^n), so clients cut off together do not come back together. */
export interface Backoff {
  initialMs: number;
  maxMs: number;
}

/** 50 ms, doubling up to 2 s (docs/protocol.md: prompt reconnection when the service returns). */
export const DEFAULT_BACKOFF: Backoff = { initialMs: 50, maxMs: 2000 };

/** The delay before attempt `attempt` + 1 (0-based). */
export function delayMs(backoff: Backoff, attempt: number): number {
  const cap = Math.min(backoff.maxMs, backoff.initialMs * 2 ** attempt);
  return cap / 2 + Math.random() * (cap / 2);
}

/** Resolves after `ms`, or at once when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) {
      resolve();
      return;
    }
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}
