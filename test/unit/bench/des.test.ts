// The scale simulation's event queue: a wait inside an event moves virtual time on without
// hanging the run, and time never goes back for the events that were due meanwhile.

import { describe, expect, it } from 'vitest';
import { EventQueue } from '../../../bench/scale/des.ts';
import { sleepOn } from '../../../lib/usecases/deps.ts';

describe('EventQueue', () => {
  it('jumps virtual time by a wait inside an event, and runs the events due meanwhile after it, never back in time', async () => {
    const queue = new EventQueue(1_000);
    const seen: [string, number][] = [];
    queue.at(1_000, async () => {
      await sleepOn(queue, 3_000);
      seen.push(['waited', queue.nowMs]);
    });
    queue.at(2_000, () => void seen.push(['due during the wait', queue.nowMs]));
    queue.at(5_000, () => void seen.push(['due after it', queue.nowMs]));
    await queue.run();
    expect(seen).toEqual([
      ['waited', 4_000],
      ['due during the wait', 4_000],
      ['due after it', 5_000],
    ]);
  });
});
