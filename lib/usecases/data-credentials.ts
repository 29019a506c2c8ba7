// A node's credentials for its job's S3 data, and for its own CloudWatch Logs streams: the
// agent asks with its callback secret, which ties the request to its attempt and node.

import type { ProcessCredentials } from '../agent/protocol.ts';
import { AGENT_LIBRARY } from '../agent/script.ts';
import type { DataAccess, JobStore, LogAccess } from '../ports.ts';
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

/**
 * `POST /jobs/{id}/attempts/{n}/log-credentials`: credentials to ship the node's output
 * into its own streams of the attempt, for a node of the live attempt. Wrong secret:
 * UnauthorizedError; a rank the job does not have: InvalidInputError; an attempt that is
 * not the latest or has ended: StaleAttemptError (a shipper asks when its phase starts and
 * every 15 minutes, so the credentials it holds carry its last lines after a cancel).
 */
export async function issueLogCredentials(
  input: AgentCredentials,
  deps: { readonly store: JobStore; readonly logAccess: LogAccess },
): Promise<ProcessCredentials> {
  const { job, attempt } = await authorizeAgent(deps.store, input);
  assertLiveAttempt(job, attempt);
  return deps.logAccess.credentialsFor(job, attempt.attempt, input.nodeRank);
}

/**
 * `POST /jobs/{id}/attempts/{n}/shipper`: the agent's library (script.ts's AGENT_LIBRARY:
 * the log shipper and the tools' installs, which user data has no room for), for a node of any attempt of the job whose secret it
 * holds; the node checks it against the SHA-256 its settings pin. Wrong secret:
 * UnauthorizedError.
 */
export async function shipperProgram(input: AgentCredentials, deps: { readonly store: JobStore }): Promise<string> {
  await authorizeAgent(deps.store, input);
  return AGENT_LIBRARY.program;
}
