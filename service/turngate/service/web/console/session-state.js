// The session as the timeline's events leave it: the phase, the active turn (what Stop names)
// and the last settled one. Only follows the service's events; it decides nothing.

export function initial() {
  return { phase: "", active: null, lastSettled: null, queued: 0 };
}

const turnView = (record) => ({
  turnId: record.turnId,
  phase: record.phase || "",
  outcome: record.outcome || "",
  settledBy: record.settledBy || "",
  runnerId: record.runnerId || "",
  error: record.error || "",
});

export function apply(state, event) {
  if (event.snapshot) {
    const snapshot = event.snapshot;
    return {
      phase: snapshot.phase || "SESSION_PHASE_IDLE",
      active: snapshot.active ? turnView(snapshot.active) : null,
      lastSettled: snapshot.lastSettled ? turnView(snapshot.lastSettled) : null,
      queued: (snapshot.queue || []).length,
    };
  }
  if (event.turnAdmitted) {
    const queued = event.turnAdmitted.fromQueue ? Math.max(state.queued - 1, 0) : state.queued;
    return { ...state, phase: "SESSION_PHASE_RUNNING", active: turnView(event.turnAdmitted.turn), queued };
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
  if (event.turnQueued) return { ...state, queued: state.queued + 1 };
  if (event.turnDequeued) return { ...state, queued: Math.max(state.queued - 1, 0) };
  return state;
}
