// retryOnConflict: only a lost race is tried again, and only so many times.

import { describe, expect, it } from 'vitest';
import { ConcurrentUpdateError, IllegalTransitionError } from '../../../../lib/errors.ts';
import { retryOnConflict } from '../../../../lib/usecases/retry.ts';

describe('retryOnConflict', () => {
  it('tries again after a conflict and returns the first success, with each try numbered', async () => {
    const seen: number[] = [];
    const result = await retryOnConflict(3, async (tryNumber) => {
      seen.push(tryNumber);
      if (tryNumber < 3) throw new ConcurrentUpdateError('lost a race');
      return 'done';
    });
    expect(result).toBe('done');
    expect(seen).toEqual([1, 2, 3]);
  });

  it('throws the last conflict once the tries are spent', async () => {
    let calls = 0;
    await expect(
      retryOnConflict(2, async () => {
        calls += 1;
        throw new ConcurrentUpdateError(`conflict ${calls}`);
      }),
    ).rejects.toThrow('conflict 2');
    expect(calls).toBe(2);
  });

  it('never retries any other error', async () => {
    let calls = 0;
    await expect(
      retryOnConflict(3, async () => {
        calls += 1;
        throw new IllegalTransitionError('SUCCEEDED', 'RUNNING');
      }),
    ).rejects.toBeInstanceOf(IllegalTransitionError);
    expect(calls).toBe(1);
  });
});
