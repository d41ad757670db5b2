// The session as the timeline's events leave it: the phase, the active turn (what Stop and Steer
// name), the last settled one and the queue (what a move names, with the version last read, and
// whether a turn's end paused it: a paused queue's flag means nothing once it is empty).
// Only follows the service's events and reads; it decides nothing.

export function initial() {
  return { phase: "", active: null, lastSettled: null, queue: [], queueVersion: "0", queuePaused: false };
}

const turnView = (record) => ({
  turnId: record.turnId,
  phase: record.phase || "",
  outcome: record.outcome || "",
  settledBy: record.settledBy || "",
  runnerId: record.runnerId || "",
  error: record.error || "",
});

const queuedView = (queued) => ({
  turnId: queued.turnId,
  runnerId: queued.runnerId || "",
  steer: queued.steer ? queued.steer.content || "" : "",
});

const without = (queue, turnId) => queue.filter((queued) => queued.turnId !== turnId);

// The queue as a read answered it (a snapshot, GetSession, MoveQueuedTurn): head first, and its
// version (int64 as a string; protobuf's JSON omits 0).
export function readQueue(state, queue, queueVersion) {
  return { ...state, queue: (queue || []).map(queuedView), queueVersion: queueVersion || "0" };
}

// A turn joining at its 1-based `position` (a requeued steer joins at the head); once only, as a
// read may already have shown it.
function enqueue(queue, queued, position) {
  if (queue.some((turn) => turn.turnId === queued.turnId)) return queue;
  const at = Math.min(Math.max((position || queue.length + 1) - 1, 0), queue.length);
  return [...queue.slice(0, at), queuedView(queued), ...queue.slice(at)];
}

export function apply(state, event) {
  if (event.snapshot) {
    const snapshot = event.snapshot;
    return readQueue({
      phase: snapshot.phase || "SESSION_PHASE_IDLE",
      active: snapshot.active ? turnView(snapshot.active) : null,
      lastSettled: snapshot.lastSettled ? turnView(snapshot.lastSettled) : null,
      queuePaused: Boolean(snapshot.queuePaused),
      // No event, no turn in its history: the service answers a session it never heard of so.
      neverSeen: !snapshot.seq && !snapshot.lastSettled,
    }, snapshot.queue, snapshot.queueVersion);
  }
  if (state.neverSeen) return apply({ ...state, neverSeen: false }, event);
  if (event.turnAdmitted) {
    const turn = event.turnAdmitted.turn;
    return { ...state, phase: "SESSION_PHASE_RUNNING", active: turnView(turn), queue: without(state.queue, turn.turnId) };
  }
  if (event.stopRequested && state.active && state.active.turnId === event.stopRequested.turnId) {
    return { ...state, phase: "SESSION_PHASE_STOPPING", active: { ...state.active, phase: "TURN_PHASE_STOPPING" } };
  }
  if (event.turnSettled) {
    const settled = turnView(event.turnSettled.turn);
    const ended = state.active && state.active.turnId === settled.turnId;
    return {
      ...state,
      phase: ended ? "SESSION_PHASE_IDLE" : state.phase,
      active: ended ? null : state.active,
      lastSettled: settled,
    };
  }
  if (event.turnQueued) {
    return { ...state, queue: enqueue(state.queue, event.turnQueued.turn, event.turnQueued.position) };
  }
  if (event.turnDequeued) return { ...state, queue: without(state.queue, event.turnDequeued.turnId) };
  if (event.queuePaused) return { ...state, queuePaused: true };
  if (event.queueResumed) return { ...state, queuePaused: false };
  if (event.queueReordered) {
    const known = new Map(state.queue.map((queued) => [queued.turnId, queued]));
    const order = event.queueReordered.turnIds || [];
    return { ...state, queue: order.map((turnId) => known.get(turnId) || { turnId, runnerId: "", steer: "" }) };
  }
  return state;
}
