/** Watching a session: its events as an async iterable that reconnects by itself from its cursor
 * and never loses nor repeats one (docs/protocol.md, "A watcher"). */
import type { Client } from "@connectrpc/connect";
import { DEFAULT_BACKOFF, delayMs, sleep, type Backoff } from "./backoff.js";
import { resumable, toTurngateError, type TurngateError } from "./errors.js";
import type { SessionEvent, SessionService } from "./gen/turngate/v1/turngate_pb.js";
import type { SessionKey } from "./session.js";

/** A position in a session's log: the last event seen (a snapshot's seq is the head it reflects)
 * and the epoch of the log it is in. Keep it to resume a watch later. */
export interface Cursor {
  seq: bigint;
  epoch: bigint;
}

export interface WatchOptions {
  /** Resume after this position (a kept `watch.cursor`); unset: start with a snapshot. */
  after?: Cursor;
  /** Only this turn's events (snapshots are always sent). */
  turnId?: string;
  /** Aborting it ends the iteration (no error). */
  signal?: AbortSignal;
  backoff?: Backoff;
  /** Told before each reconnection: why (undefined: the server ended the stream) and when. */
  onReconnect?: (reconnect: { error: TurngateError | undefined; delayMs: number; cursor: Cursor }) => void;
}

/** The session's events in seq order: `for await (const event of watch)`.
 *
 * A fresh watch starts with a snapshot (`event.kind.case === "snapshot"`). After a blip, a
 * restart or drain of the service, or a cut-off for falling behind, it reconnects with backoff
 * and jitter, resuming after `cursor`: no event is lost or repeated. When the service cannot
 * resume from the cursor it sends a snapshot with `resync = true` (`isResync(event)`): replace
 * your state with it, events in between are not replayed. An event of a kind this client does
 * not know (from a newer service) has `kind.case === undefined`: skip it. Any other error ends
 * the iteration with a typed `TurngateError`. Leaving the loop (`break`) or aborting `signal`
 * closes the stream. */
export class SessionWatch implements AsyncIterable<SessionEvent> {
  /** The last event yielded (with `after`, the position it was given). */
  cursor: Cursor;

  constructor(
    private readonly sessions: Client<typeof SessionService>,
    private readonly session: SessionKey,
    private readonly options: WatchOptions = {},
  ) {
    this.cursor = options.after ?? { seq: 0n, epoch: 0n };
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<SessionEvent, void, undefined> {
    const { signal, turnId = "", backoff = DEFAULT_BACKOFF, onReconnect } = this.options;
    let attempt = 0;
    while (!signal?.aborted) {
      const call = new AbortController();
      const abortCall = (): void => call.abort();
      signal?.addEventListener("abort", abortCall, { once: true });
      let error: TurngateError | undefined;
      try {
        const request = {
          session: this.session,
          afterSeq: this.cursor.seq,
          epoch: this.cursor.epoch,
          turnId,
        };
        for await (const { event } of this.sessions.watchSession(request, { signal: call.signal })) {
          attempt = 0;
          if (event && (event.kind.case === "snapshot" || event.seq > this.cursor.seq)) {
            this.cursor = { seq: event.seq, epoch: event.epoch };
            yield event;
          }
        }
      } catch (thrown) {
        if (signal?.aborted) {
          return;
        }
        error = toTurngateError(thrown);
        if (!resumable(error)) {
          throw error;
        }
      } finally {
        signal?.removeEventListener("abort", abortCall);
        call.abort();
      }
      const delay = delayMs(backoff, attempt++);
      onReconnect?.({ error, delayMs: delay, cursor: this.cursor });
      await sleep(delay, signal);
    }
  }
}

/** Whether the event is a snapshot sent because the cursor could not be resumed: replace the
 * state with it, do not merge. */
export function isResync(event: SessionEvent): boolean {
  return event.kind.case === "snapshot" && event.kind.value.resync;
}

/** Watches `session`: see `SessionWatch`. */
export function watchSession(
  sessions: Client<typeof SessionService>,
  session: SessionKey,
  options?: WatchOptions,
): SessionWatch {
  return new SessionWatch(sessions, session, options);
}
