// User data benchmark: how much of EC2's 16 KiB of user data the agent itself takes,
// gzipped as a launch sends it, and so how much is left for a task's setup, run and envs.

import { packedAgent, USER_DATA_MAX_BYTES } from '../lib/adapters/ec2-user-data.ts';
import { agentSecretPath, ssmEndpoint } from '../lib/agent/secret-parameter.ts';
import { parseTaskFile } from '../lib/spec/parse.ts';
import type { Benchmark, BenchResult } from './types.ts';

/** Target: at least this much room left for the task's own text, in bytes gzipped. */
export const MIN_ROOM_BYTES = 4096;

/** The agent of a one-line task, with each optional part a launch can add. */
function measure(): { readonly label: string; readonly bytes: number }[] {
  const spec = parseTaskFile('run: echo hi\n').spec;
  const base = {
    apiUrl: 'https://abcdefghij.execute-api.us-east-1.amazonaws.com/v1/',
    jobId: 'j-xxxxxxxxx-xxxxxx',
    attempt: 1,
    secretSource: { path: agentSecretPath('relaunch'), region: 'us-east-1', endpoint: ssmEndpoint('us-east-1') },
    spec,
    heartbeatSeconds: 30,
  };
  return [
    { label: 'a one-line task', bytes: packedAgent(base).length },
    { label: 'with S3 data (data credentials)', bytes: packedAgent({ ...base, dataCredentials: true }).length },
  ];
}

export const userDataBenchmark: Benchmark = {
  name: 'user-data: the agent in EC2 user data',
  async run(): Promise<BenchResult> {
    const rows = measure();
    const largest = Math.max(...rows.map((row) => row.bytes));
    const room = USER_DATA_MAX_BYTES - largest;
    return {
      lines: ['| agent for | bytes gzipped | of 16,384 |', '|---|---:|---:|', ...rows.map((row) => `| ${row.label} | ${row.bytes} | ${((100 * row.bytes) / USER_DATA_MAX_BYTES).toFixed(1)}% |`)],
      checks: [{ target: `at least ${MIN_ROOM_BYTES} bytes left for setup, run and envs`, met: room >= MIN_ROOM_BYTES, detail: `${room} bytes left` }],
    };
  },
};
