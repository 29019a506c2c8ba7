// One way to retry a write that lost a race: read again and try again, a bounded number of times.

import { ConcurrentUpdateError } from '../errors.ts';

/**
 * Runs `attempt` up to `tries` times, again only when it throws ConcurrentUpdateError
 * (another writer changed what it read); any other error, or the last conflict,
 * propagates. `attempt` must read what it decides on itself, so each try sees fresh state.
 * It is given the try's number, from 1.
 */
export async function retryOnConflict<T>(tries: number, attempt: (tryNumber: number) => Promise<T>): Promise<T> {
  for (let tryNumber = 1; ; tryNumber += 1) {
    try {
      return await attempt(tryNumber);
    } catch (error) {
      if (!(error instanceof ConcurrentUpdateError) || tryNumber >= tries) throw error;
    }
  }
}
