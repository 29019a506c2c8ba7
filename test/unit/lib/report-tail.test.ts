// Output tails within an attempt's storable size: num_nodes is bounded and each report keeps
// its share, so 2 x MAX_NUM_NODES reports of the agent's longest tail fit one DynamoDB item.

import { randomUUID } from 'node:crypto';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OUTPUT_TAIL_MAX_BYTES } from '../../../lib/agent/protocol.ts';
import { ensureTable, startDynalite, type LocalDynamo } from '../../../local/dynalite.ts';
import { DynamoJobStore } from '../../../lib/adapters/dynamo-job-store/index.ts';
import { InvalidTaskSpecError } from '../../../lib/errors.ts';
import { keepTail, MAX_NUM_NODES, storedTailMaxBytes } from '../../../lib/report-tail.ts';
import { hashSecret } from '../../../lib/secrets.ts';
import { parseTaskObject } from '../../../lib/task-file/parse.ts';
import { reportPhase } from '../../../lib/usecases/report-phase.ts';
import { newJobRecord } from '../../../lib/usecases/submit-job.ts';
import { FakeWorkflow } from '../../support/fakes/fake-workflow.ts';
import { attemptRecord } from '../../support/fixtures/records.ts';
import { TestClock, taskSpec } from '../../support/usecases-harness.ts';

describe('num_nodes', () => {
  it(`accepts up to MAX_NUM_NODES (${MAX_NUM_NODES}) and names the bound above it`, () => {
    expect(parseTaskObject({ run: 'x', num_nodes: MAX_NUM_NODES }).spec.numNodes).toBe(MAX_NUM_NODES);
    expect(() => parseTaskObject({ run: 'x', num_nodes: MAX_NUM_NODES + 1 })).toThrow(InvalidTaskSpecError);
    expect(() => parseTaskObject({ run: 'x', num_nodes: MAX_NUM_NODES + 1 })).toThrow(
      `num_nodes: expected an integer from 1 to ${MAX_NUM_NODES} (the most nodes relaunch runs a task on), got ${MAX_NUM_NODES + 1}`,
    );
  });
});

describe('storedTailMaxBytes and keepTail', () => {
  it.each([
    [1, OUTPUT_TAIL_MAX_BYTES],
    [16, OUTPUT_TAIL_MAX_BYTES],
    [17, 7710],
    [MAX_NUM_NODES, 2048],
  ])('keeps per report, for %i node(s), %i bytes', (nodes, bytes) => {
    expect(storedTailMaxBytes(nodes)).toBe(bytes);
  });

  it('keeps the end, never half a character', () => {
    expect(keepTail('abcdef', 3)).toBe('def');
    expect(keepTail('short', 100)).toBe('short');
    expect(keepTail('xé✓', 4)).toBe('✓'); // é is 2 bytes, ✓ 3: the cut would halve é
  });
});

describe('an attempt of MAX_NUM_NODES nodes on DynamoDB (dynalite)', () => {
  let dynamo: LocalDynamo;
  let client: DynamoDBClient;
  beforeAll(async () => {
    dynamo = await startDynalite();
    client = new DynamoDBClient({ endpoint: dynamo.endpoint, region: 'us-east-1', credentials: { accessKeyId: 'l', secretAccessKey: 'l' } });
  });
  afterAll(async () => {
    client.destroy();
    await dynamo.close();
  });

  it('stores both phases of every node with the longest tail the agent sends', async () => {
    const tableName = `jobs-${randomUUID()}`;
    await ensureTable(client, tableName);
    const store = new DynamoJobStore({ client, tableName });
    const deps = { store, workflow: new FakeWorkflow(), clock: new TestClock() };
    const jobId = 'j-wide';
    await store.createJob({ ...newJobRecord(jobId, taskSpec({ numNodes: MAX_NUM_NODES }), '2026-03-01T11:00:00.000Z'), status: 'STARTING' });
    const instances = Array.from({ length: MAX_NUM_NODES }, (_, rank) => ({ instanceId: `i-0123456789abcde${rank}`, nodeRank: rank, privateIp: `10.0.1.${rank}` }));
    await store.putAttempt(
      attemptRecord(jobId, 1, '2026-03-01T11:00:01.000Z', { secretHash: hashSecret('s3cret'), instances, taskToken: 't'.repeat(1024) }),
    );
    const tail = 'é'.repeat(OUTPUT_TAIL_MAX_BYTES / 2); // 8 KiB of two-byte characters

    for (const phase of ['setup', 'run'] as const) {
      for (let nodeRank = 0; nodeRank < MAX_NUM_NODES; nodeRank += 1) {
        await reportPhase({ jobId, attempt: 1, nodeRank, phase, exitCode: 0, outputTail: tail, secret: 's3cret' }, deps);
      }
    }

    const stored = await store.getAttempt(jobId, 1);
    expect(stored.reports).toHaveLength(2 * MAX_NUM_NODES);
    expect(stored.outcome?.kind).toBe('EXITED');
    for (const report of stored.reports) expect(Buffer.byteLength(report.outputTail)).toBeLessThanOrEqual(storedTailMaxBytes(MAX_NUM_NODES));
  }, 60_000);
});
