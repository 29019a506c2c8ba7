// A process for the crash tests: the controller's own store writes (launch, instances,
// token, report, decision, release: every TransactWriteItems a job makes), for several
// jobs at once, as fast as the persisted local DynamoDB takes them, until it is killed.
//
//   node --import tsx test/system/faults/store-load.ts <database folder> <table> <jobs at once>
//
// Prints `loading` once the store is open and the first writes are under way.

import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoJobStore } from '../../../lib/adapters/dynamo-job-store/index.ts';
import { ensureTable, startDynalite } from '../../../local/dynalite.ts';
import { evaluatePolicy, releaseInstances } from '../../../lib/usecases/index.ts';
import type { WorkflowState } from '../../../lib/workflow/contract.ts';
import { givenJob, harness, initialState, launchAndAwait, report, taskSpec } from '../../support/usecases-harness.ts';

/** Attempts one job makes before the loop starts another job. */
const ATTEMPTS_PER_JOB = 12;

async function main(): Promise<void> {
  const [folder, table, jobsArgument] = process.argv.slice(2);
  if (folder === undefined || table === undefined) throw new Error('usage: store-load.ts <database folder> <table> <jobs at once>');
  const dynamo = await startDynalite({ path: folder });
  const client = new DynamoDBClient({ endpoint: dynamo.endpoint, region: 'local', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } });
  await ensureTable(client, table);
  const h = harness(new DynamoJobStore({ client, tableName: table }));
  const spec = taskSpec({ useSpot: false, recovery: { recoverOnExitCodes: [29] } });
  let started = 0;
  const loop = async (lane: number): Promise<never> => {
    for (let round = 0; ; round += 1) {
      const jobId = `j-load-${process.pid}-${lane}-${round}`;
      await givenJob(h, spec, jobId);
      let state: WorkflowState = initialState(jobId);
      for (let attempt = 1; attempt <= ATTEMPTS_PER_JOB; attempt += 1) {
        state = await launchAndAwait(h, state);
        await report(h, state.attempt, 'run', 29, 0, jobId);
        state = await evaluatePolicy(state, h.deps);
        state = await releaseInstances(state, h.deps);
        started += 1;
        if (started === 1) console.log('loading');
      }
    }
  };
  const lanes = Number(jobsArgument ?? '4');
  await Promise.all(Array.from({ length: lanes }, (_, lane) => loop(lane)));
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
