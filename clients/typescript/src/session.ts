/** Names one session: the project (tenant) and the conversation within it. */
export interface SessionKey {
  projectId: string;
  sessionId: string;
}
