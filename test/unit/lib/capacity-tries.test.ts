// Reading a no-capacity reason's tries back (lib/capacity-tries.ts), as EC2's and the local compute word them.

import { describe, expect, it } from 'vitest';
import { capacityTries, triedInstanceTypes } from '../../../lib/capacity-tries.ts';

describe('capacityTries', () => {
  it('lists each try of an EC2 launch with its type, zone and answer, up to the next try', () => {
    const reason =
      'waiting for capacity: no capacity for job j-1 attempt 2 (spot, 2 nodes): tried g5.xlarge in us-east-1a: InsufficientInstanceCapacity, g5.2xlarge in us-east-1b: MaxSpotInstanceCountExceeded; next try in 96 s; launch_timeout 1h, 58m left';
    expect(capacityTries(reason)).toEqual([
      { instanceType: 'g5.xlarge', where: 'in us-east-1a', answer: 'InsufficientInstanceCapacity' },
      { instanceType: 'g5.2xlarge', where: 'in us-east-1b', answer: 'MaxSpotInstanceCountExceeded' },
    ]);
  });

  it("reads the local runtime's tries, and names each type once", () => {
    const reason = 'waiting for capacity: no capacity: tried local-process try 1: InsufficientInstanceCapacity (chaos file), local-process try 2: InsufficientInstanceCapacity (chaos file)';
    expect(capacityTries(reason)[1]).toEqual({ instanceType: 'local-process', where: 'try 2', answer: 'InsufficientInstanceCapacity (chaos file)' });
    expect(triedInstanceTypes(reason)).toEqual(['local-process']);
  });

  it('finds none in a reason that lists no tries', () => {
    expect(capacityTries('waiting for capacity: InsufficientInstanceCapacity in every zone tried; next try in 60 s')).toEqual([]);
  });
});
