// Transactions benchmark: what making TransactWriteItems whole across a crash costs on the
// local store (local/dynalite.ts): a transaction of three items against the same
// three writes made one by one, on a persisted store (with its intent) and in memory
// (where there is no crash to survive, so no intent).

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { DynamoDBClient, PutItemCommand, TransactWriteItemsCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { ensureTable, startDynalite } from '../local/dynalite.ts';
import type { Benchmark, BenchResult } from './types.ts';

/** Transactions (and as many rounds of plain writes) measured per store. */
const ROUNDS = 300;
/** Items per transaction: a decision writes the attempt, the job and an EVENT row. */
const ITEMS = 3;
/** Bytes of each item: about a job's record. */
const ITEM_BYTES = 2048;
/** Target: a three-item transaction on a persisted store, median. */
export const MAX_MEDIAN_TRANSACTION_MS = 15;

const TABLE = 'bench';

interface Timings {
  readonly plain: number[];
  readonly transaction: number[];
}

async function measure(folder: string | undefined): Promise<Timings> {
  const dynamo = await startDynalite(folder === undefined ? {} : { path: folder });
  const client = new DynamoDBClient({ endpoint: dynamo.endpoint, region: 'local', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } });
  try {
    await ensureTable(client, TABLE);
    const item = (round: number, n: number): Record<string, AttributeValue> => ({
      pk: { S: `JOB#${round % 50}` },
      sk: { S: `ITEM#${n}` },
      body: { S: 'x'.repeat(ITEM_BYTES) },
    });
    const plain: number[] = [];
    const transaction: number[] = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      let start = performance.now();
      for (let n = 0; n < ITEMS; n += 1) await client.send(new PutItemCommand({ TableName: TABLE, Item: item(round, n) }));
      plain.push(performance.now() - start);
      start = performance.now();
      await client.send(new TransactWriteItemsCommand({ TransactItems: Array.from({ length: ITEMS }, (_, n) => ({ Put: { TableName: TABLE, Item: item(round, n) } })) }));
      transaction.push(performance.now() - start);
    }
    return { plain, transaction };
  } finally {
    client.destroy();
    await dynamo.close();
  }
}

function quantile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
}

const ms = (value: number): string => value.toFixed(2);

export const transactionsBenchmark: Benchmark = {
  name: 'transactions: TransactWriteItems on the local store, whole across a crash',
  async run(): Promise<BenchResult> {
    const folder = mkdtempSync(path.join(tmpdir(), 'relaunch-bench-transactions-'));
    try {
      const persisted = await measure(folder);
      const memory = await measure(undefined);
      const row = (label: string, t: Timings): string =>
        `| ${label} | ${ms(quantile(t.plain, 0.5))} | ${ms(quantile(t.transaction, 0.5))} | ${ms(quantile(t.transaction, 0.95))} | ${(quantile(t.transaction, 0.5) / quantile(t.plain, 0.5)).toFixed(2)}x |`;
      const median = quantile(persisted.transaction, 0.5);
      return {
        lines: [
          `${ROUNDS} rounds of ${ITEMS} items of ${ITEM_BYTES} bytes: the items put one by one, then the same items in one transaction (ms)`,
          '',
          '| store | 3 plain writes, median | transaction, median | transaction, p95 | transaction / plain |',
          '|---|---:|---:|---:|---:|',
          row('persisted (with its intent)', persisted),
          row('in memory (no intent)', memory),
        ],
        checks: [{ target: `a ${ITEMS}-item transaction on a persisted store within ${MAX_MEDIAN_TRANSACTION_MS} ms (median)`, met: median <= MAX_MEDIAN_TRANSACTION_MS, detail: `${ms(median)} ms` }],
      };
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  },
};
