// DynamoJobStore on moto's DynamoDB: the JobStore contract dynalite runs, against a second,
// independent implementation of DynamoDB's API, on the table the store creates in both;
// all but its races of two writes, which moto cannot keep atomic.

import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll } from 'vitest';
import { ensureTable } from '../../../local/dynalite.ts';
import { DynamoJobStore } from '../../../lib/adapters/dynamo-job-store/index.ts';
import { describeJobStoreContract } from '../../support/job-store.contract.ts';
import { startMoto, useMotoEnvironment, type Moto } from './moto.ts';

let moto: Moto;
let restoreEnv: () => void;
let tables = 0;

beforeAll(async () => {
  moto = await startMoto();
  restoreEnv = useMotoEnvironment(moto);
});
afterAll(async () => {
  restoreEnv?.();
  await moto?.stop();
});

describeJobStoreContract(
  'DynamoJobStore on moto',
  async () => {
    const client = new DynamoDBClient({ endpoint: moto.endpoint });
    tables += 1;
    const tableName = `jobs-${tables}`;
    await ensureTable(client, tableName);
    return new DynamoJobStore({ client, tableName });
  },
  // Failed here on moto under load: a racing decision's job row written and its attempt row
  // not; an adopt and a release of one standby both applied; a concurrent heartbeat lost.
  { atomicRaces: false },
);
