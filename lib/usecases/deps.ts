// The ports a use case may be given: each use case names the subset it needs.

import type { Clock, Compute, JobSecrets, JobStore, LaunchPace, Random, Workflow } from '../ports.ts';

/**
 * Everything the use cases reach the world through. A Lambda and the local runtime build
 * one of these from their adapters; a use case asks for a `Pick` of it, so its signature
 * says exactly what I/O it can do.
 */
export interface UseCaseDeps {
  readonly store: JobStore;
  readonly compute: Compute;
  readonly workflow: Workflow;
  readonly clock: Clock;
  readonly random: Random;
  readonly secrets: JobSecrets;
  readonly pace: LaunchPace;
}

/** Waits `ms` of the clock's time: its own sleep, or real time when it has none. */
export function sleepOn(clock: Clock, ms: number): Promise<void> {
  if (clock.sleep !== undefined) return clock.sleep(ms);
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The current time as stored: ISO 8601, UTC. */
export function nowIso(clock: Clock): string {
  return clock.now().toISOString();
}

/** An error's message, whatever was thrown (lib/errors.ts). */
export { errorMessage } from '../errors.ts';
