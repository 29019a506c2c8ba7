// A node's credentials for its job's S3 data: the agent asks with its callback secret.

import type { ProcessCredentials } from '../agent/protocol.ts';
import type { DataAccess, JobStore } from '../ports.ts';
import { assertLiveAttempt, authorizeAgent, type AgentCredentials } from './agent.ts';

/**
 * `POST /jobs/{id}/attempts/{n}/data-credentials`: credentials scoped to the job's own
 * data, for a node of its live attempt. Wrong secret: UnauthorizedError; an attempt that
 * is not the latest or has ended: StaleAttemptError (credentials given before stay good
 * until they expire, within the hour).
 */
export async function issueDataCredentials(
  input: AgentCredentials,
  deps: { readonly store: JobStore; readonly dataAccess: DataAccess },
): Promise<ProcessCredentials> {
  const { job, attempt } = await authorizeAgent(deps.store, input);
  assertLiveAttempt(job, attempt);
  return deps.dataAccess.credentialsFor(job, attempt.attempt);
}
