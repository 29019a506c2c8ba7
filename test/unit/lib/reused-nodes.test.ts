// The words status and the jobs page use for the nodes a relaunch reused.

import { describe, expect, it } from 'vitest';
import { reusedNodesWords, standbyOfWords } from '../../../lib/reused-nodes.ts';

describe('reusedNodesWords', () => {
  it('names each node: the attempt it was reused from, or new', () => {
    const instances = [
      { nodeRank: 0, instanceId: 'i-a', reusedFrom: 1 },
      { nodeRank: 1, instanceId: 'i-b', reusedFrom: null },
      { nodeRank: 2, instanceId: 'i-c', reusedFrom: 3 },
    ];
    expect(reusedNodesWords({ instances })).toBe('node 0 reused from attempt 1, node 1 new, node 2 reused from attempt 3');
  });

  it('says nothing of an attempt on new nodes only, or of a view from an API that predates reuse', () => {
    expect(reusedNodesWords({ instances: [{ nodeRank: 0, instanceId: 'i-a', reusedFrom: null }] })).toBeNull();
    expect(reusedNodesWords({ instances: [{ nodeRank: 0, instanceId: 'i-a' }] })).toBeNull();
  });
});

describe('standbyOfWords', () => {
  it('names the attempt a standby is for, and the nodes a standby of the warned node alone joins', () => {
    expect(standbyOfWords({ for: 1, beside: null })).toBe('attempt 1');
    expect(standbyOfWords({ for: 3, beside: [0, 2] })).toBe('attempt 3, beside its nodes 0, 2');
    expect(standbyOfWords({ for: 1, beside: [0] })).toBe('attempt 1, beside its node 0');
    // A view from an API that predates it has no `beside`.
    expect(standbyOfWords({ for: 2 })).toBe('attempt 2');
  });
});
