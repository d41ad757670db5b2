// The example page's script: watch a session with the TypeScript client and send a guarded Stop.
// Everything shown is set as text (textContent), never as HTML: ids and reasons come from runners.
import {
  createTurngateTransport,
  InteractionStatus,
  isResync,
  SessionPhase,
  SteerStatus,
  toTurngateError,
  ToolCallStatus,
  Turngate,
  TurnOutcome,
  TurnPhase,
  type SessionEvent,
  type StopResult,
  type TurnRecord,
} from "../../clients/typescript/src/index.js";

interface View {
  phase: SessionPhase;
  active: TurnRecord | undefined;
  lastSettled: TurnRecord | undefined;
}

const element = <T extends HTMLElement>(id: string): T =>
  document.getElementById(id) as T;
const form = element<HTMLFormElement>("watch-form");
const stopButton = element<HTMLButtonElement>("stop");
// The turn the last Stop left stopping, until it ends.
let stopping: string | undefined;
let view: View = {
  phase: SessionPhase.UNSPECIFIED,
  active: undefined,
  lastSettled: undefined,
};
let watching:
  { turngate: Turngate; sessionId: string; abort: AbortController } | undefined;

/** The view after `event`: a snapshot replaces it (a resync one too), the others change it. */
function apply(current: View, event: SessionEvent): View {
  switch (event.kind.case) {
    case "snapshot": {
      const { phase, active, lastSettled } = event.kind.value;
      return { phase, active, lastSettled };
    }
    case "turnAdmitted":
      return {
        ...current,
        phase: SessionPhase.RUNNING,
        active: event.kind.value.turn,
      };
    case "stopRequested":
      return current.active?.turnId === event.kind.value.turnId
        ? {
            ...current,
            phase: SessionPhase.STOPPING,
            active: { ...current.active, phase: TurnPhase.STOPPING },
          }
        : current;
    case "turnSettled":
      return {
        phase: SessionPhase.IDLE,
        active: undefined,
        lastSettled: event.kind.value.turn,
      };
    default:
      return current;
  }
}

function describe(event: SessionEvent): string {
  const kind = event.kind;
  switch (kind.case) {
    case "snapshot":
      return `${isResync(event) ? "resync snapshot" : "snapshot"}: ${SessionPhase[kind.value.phase]}`;
    case "turnAdmitted":
      return `turn ${kind.value.turn?.turnId} admitted${kind.value.fromQueue ? " from the queue" : ""}`;
    case "stopRequested":
      return `stop requested for ${kind.value.turnId}${kind.value.reason ? `: ${kind.value.reason}` : ""}`;
    case "toolCall":
      return `tool call ${kind.value.toolCall?.name} (${kind.value.toolCall?.callId}) of ${kind.value.turnId}: ${ToolCallStatus[kind.value.toolCall?.status ?? 0]}`;
    case "interaction":
      return `interaction ${kind.value.interaction?.interactionId} of ${kind.value.turnId}: ${InteractionStatus[kind.value.interaction?.status ?? 0]}`;
    case "turnSettled":
      return `turn ${kind.value.turn?.turnId} settled ${TurnOutcome[kind.value.turn?.outcome ?? 0]}`;
    case "turnQueued":
      return `turn ${kind.value.turn?.turnId} queued at ${kind.value.position}`;
    case "turnDequeued":
      return `turn ${kind.value.turnId} left the queue ${TurnOutcome[kind.value.outcome]}`;
    case "queuePaused":
      return `queue paused by ${kind.value.turnId}`;
    case "queueResumed":
      return "queue resumed";
    case "turnSteered":
      return `steer ${kind.value.steer?.steerId} sent to ${kind.value.turnId}: ${kind.value.steer?.content}`;
    case "steerEnded":
      return `steer ${kind.value.steerId} of ${kind.value.turnId} ended ${SteerStatus[kind.value.status]}`;
    case "queueReordered":
      return `queue reordered: ${kind.value.turnIds.join(", ")}`;
    case undefined:
      return "an event of a kind this page does not know";
  }
}

/** What the Stop did, in words: "stopped" only when a running turn was. */
function stopOutcome(result: StopResult): string {
  switch (result.outcome) {
    case "cancelled":
      if (!result.stoppedRunningTurn) {
        const runsOn = result.activeTurnId
          ? `; ${result.activeTurnId} runs on`
          : "";
        return `Nothing running was stopped: ${result.cancelledTurnIds.join(", ")} was cancelled before it ran${runsOn}.`;
      }
      return result.settled
        ? `Stopped ${result.cancelledTurnIds.join(", ")}: settled CANCELLED at once.`
        : `Stopping ${result.stoppingTurnId}: its runner winds down by ${result.stopDeadline?.toLocaleTimeString() ?? "its deadline"}.`;
    case "mismatch":
      return `Not stopped: ${result.expectedTurnId} had already ended ${TurnOutcome[result.expectedOutcome]}, and ${result.currentTurnId} is ${TurnPhase[result.currentPhase]}.`;
    case "idle":
      return `Nothing is running${result.lastTurnId ? `: ${result.lastTurnId} ended ${TurnOutcome[result.lastOutcome]}` : ""}.`;
  }
}

function turnText(turn: TurnRecord | undefined): string {
  if (!turn) {
    return "–";
  }
  const outcome = turn.outcome ? ` ${TurnOutcome[turn.outcome]}` : "";
  return `${turn.turnId} (${TurnPhase[turn.phase]}${outcome}, runner ${turn.runnerId})`;
}

function render(): void {
  // "Stopping t1…" holds only while t1 does: once it has ended, say how.
  if (stopping && view.active?.turnId !== stopping) {
    const ended =
      view.lastSettled?.turnId === stopping
        ? ` ${TurnOutcome[view.lastSettled.outcome]}`
        : "";
    element("outcome").textContent = `${stopping} has ended${ended}.`;
    stopping = undefined;
  }
  element("phase").textContent = SessionPhase[view.phase];
  element("active").textContent = turnText(view.active);
  element("last-settled").textContent = turnText(view.lastSettled);
  stopButton.disabled =
    !watching || !view.active || view.active.phase !== TurnPhase.RUNNING;
}

async function watch(
  turngate: Turngate,
  sessionId: string,
  abort: AbortController,
): Promise<void> {
  const status = element("connection");
  const log = element("events");
  log.replaceChildren();
  status.textContent = "Connecting…";
  const events = turngate.watch(sessionId, {
    signal: abort.signal,
    onReconnect: ({ error, cursor }) => {
      status.textContent = `Disconnected (${error?.name ?? "stream ended"}); resuming after seq ${cursor.seq}…`;
    },
  });
  try {
    for await (const event of events) {
      status.textContent = `Watching ${sessionId}.`;
      view = apply(view, event);
      element("cursor").textContent = `seq ${event.seq}, epoch ${event.epoch}`;
      const line = document.createElement("li");
      line.textContent = `${event.seq}: ${describe(event)}`;
      log.append(line);
      render();
    }
  } catch (thrown) {
    const error = toTurngateError(thrown);
    status.textContent = `The watch ended: ${error.name}: ${error.message}`;
  }
}

form.addEventListener("submit", (submitted) => {
  submitted.preventDefault();
  watching?.abort.abort();
  const fields = new FormData(form);
  const token = String(fields.get("token") ?? "");
  const transport = createTurngateTransport({
    baseUrl: String(fields.get("server")),
    token: token || undefined,
  });
  const turngate = new Turngate(transport, String(fields.get("project")));
  watching = {
    turngate,
    sessionId: String(fields.get("session")),
    abort: new AbortController(),
  };
  view = {
    phase: SessionPhase.UNSPECIFIED,
    active: undefined,
    lastSettled: undefined,
  };
  element("outcome").textContent = "";
  stopping = undefined;
  render();
  void watch(watching.turngate, watching.sessionId, watching.abort);
});

stopButton.addEventListener("click", async () => {
  if (!watching || !view.active) {
    return;
  }
  const outcome = element("outcome");
  stopButton.disabled = true;
  try {
    // Guarded: it stops the turn this page shows, never one that started since.
    const result = await watching.turngate.stop(watching.sessionId, {
      expectedTurnId: view.active.turnId,
      reason: "Stop from the example page",
    });
    outcome.textContent = stopOutcome(result);
    stopping =
      result.outcome === "cancelled" && !result.settled
        ? result.stoppingTurnId || undefined
        : undefined;
  } catch (thrown) {
    const error = toTurngateError(thrown);
    outcome.textContent = `Stop failed: ${error.name}: ${error.message}`;
  }
  render();
});

// ?server=…&project=…&session=… fills the form in, and starts watching when all three are given.
const query = new URLSearchParams(location.search);
for (const name of ["server", "project", "session"]) {
  element<HTMLInputElement>(name).value = query.get(name) ?? "";
}
if (query.get("server") && query.get("project") && query.get("session")) {
  form.requestSubmit();
}
