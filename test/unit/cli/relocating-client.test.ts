// A reading command's client of a runtime another process serves: when that runtime is gone
// between the look and the call (nothing answers), it looks again and asks there, once; an
// answer, a refusal or a runtime that does not answer is never asked twice.

import { describe, expect, it } from 'vitest';
import { RelocatingClient, type Target } from '../../../cli/context.ts';
import { ApiError, LOCAL_PACING, RuntimeNotAnsweringError, type JobsClient } from '../../../cli/jobs-client.ts';

/** A target whose client answers listJobs with `answer` (or throws it), counting calls and closes. */
function target(answer: unknown): Target & { calls: number; closed: number } {
  const made = {
    calls: 0,
    closed: 0,
    runtime: null,
    local: true,
    pageUrl: null,
    client: {
      where: 'local',
      pacing: LOCAL_PACING,
      dataDir: '/data',
      listJobs: () => {
        made.calls += 1;
        return answer instanceof Error ? Promise.reject(answer) : Promise.resolve(answer);
      },
    } as unknown as JobsClient,
    close: () => {
      made.closed += 1;
      return Promise.resolve();
    },
  };
  return made;
}

describe('RelocatingClient', () => {
  it('asks again where the folder is served now when nothing answered, and closes the old target', async () => {
    const gone = target(new ApiError(0, 'cannot reach http://127.0.0.1:1: fetch failed'));
    const now = target([{ jobId: 'j-1' }]);
    let reopened = 0;
    const client = new RelocatingClient(gone, () => {
      reopened += 1;
      return Promise.resolve(now);
    });
    expect(await client.listJobs()).toEqual([{ jobId: 'j-1' }]);
    expect([gone.calls, gone.closed, reopened, now.calls]).toEqual([1, 1, 1, 1]);
    await client.close();
    expect(now.closed).toBe(1);
  });

  it.each([
    ['an answer the API gave (404)', new ApiError(404, 'no such job')],
    ['a runtime that does not answer', new RuntimeNotAnsweringError(4242, 'not answering')],
  ])('never asks again after %s', async (_what, error) => {
    let reopened = 0;
    const client = new RelocatingClient(target(error), () => {
      reopened += 1;
      return Promise.resolve(target([]));
    });
    await expect(client.listJobs()).rejects.toBe(error);
    expect(reopened).toBe(0);
  });
});
