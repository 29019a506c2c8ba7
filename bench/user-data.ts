// User data benchmark: how much of EC2's 16 KiB of user data the agent itself takes,
// gzipped as a launch sends it, and so how large a task's setup, run and envs may be:
// exactly for text gzip cannot shrink, and for ordinary shell from its cost per byte in
// real task files (the team's own, and SkyPilot's corpus beside the repository when it is
// there, as test/unit/lib/task-file/corpus.test.ts reads it).

import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { ORDINARY_SHELL_FIT_BYTES, packedAgent, USER_DATA_MAX_BYTES } from '../lib/adapters/ec2-user-data.ts';
import { agentSecretPath, ssmEndpoint } from '../lib/agent/secret-parameter.ts';
import { parseTaskFile } from '../lib/task-file/parse.ts';
import type { Benchmark, BenchResult, TargetCheck } from './types.ts';

/** Target: at least this much room left for the task's own text, in bytes gzipped. */
export const MIN_ROOM_BYTES = 4096;

const REPO_ROOT = path.resolve(import.meta.dirname, '..');

/** The agent of a task whose run is `run`, on a node with S3 data (the larger agent). */
function packed(run: string, dataCredentials = true): number {
  const spec = { ...parseTaskFile('run: echo hi\n').spec, run };
  return packedAgent({
    apiUrl: 'https://abcdefghij.execute-api.us-east-1.amazonaws.com/v1/',
    jobId: 'j-xxxxxxxxx-xxxxxx',
    attempt: 1,
    secretSource: { path: agentSecretPath('relaunch'), region: 'us-east-1', endpoint: ssmEndpoint('us-east-1') },
    spec,
    heartbeatSeconds: 30,
    dataCredentials,
  }).length;
}

/** The longest prefix of `text` (in characters, all ASCII here or cut at a character) whose agent fits. */
function longestFit(text: string): number {
  let low = 0;
  let high = text.length;
  while (low < high) {
    const middle = Math.ceil((low + high) / 2);
    if (packed(text.slice(0, middle)) <= USER_DATA_MAX_BYTES) low = middle;
    else high = middle - 1;
  }
  return low;
}

/** Printable ASCII that gzip cannot shrink much: a fixed pseudo-random sequence (the same every run). */
function incompressible(length: number): string {
  let state = 2463534242;
  let text = '';
  for (let i = 0; i < length; i += 1) {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    text += String.fromCharCode(33 + ((state >>> 0) % 94));
  }
  return text;
}

/** The setup and run of every task file in `folder`, one after another. */
function shellOf(folder: string): string {
  const scripts: string[] = [];
  for (const name of readdirSync(folder).filter((file) => file.endsWith('.yaml')).sort()) {
    for (const document of parseAllDocuments(readFileSync(path.join(folder, name), 'utf8'))) {
      for (const key of ['setup', 'run']) {
        const script: unknown = document.get(key);
        if (typeof script === 'string') scripts.push(script.endsWith('\n') ? script : `${script}\n`);
      }
    }
  }
  return scripts.join('');
}

interface ShellFit {
  readonly label: string;
  readonly sampleBytes: number;
  /** Compressed bytes the sample adds to the agent, per 1,000 bytes of it. */
  readonly costPerKb: number;
  readonly fitBytes: number;
  /** Whether fitBytes was found by trying (the sample did not all fit) or estimated from its cost. */
  readonly exact: boolean;
}

/**
 * How much shell like `sample` fits: by trying prefixes when the sample is larger than
 * what fits, else the room left by the agent alone divided by the sample's compressed
 * cost per byte (more text of the same kind costs the same, gzip's window being 32 KiB).
 */
function shellFit(label: string, sample: string): ShellFit {
  const empty = packed('');
  const cost = (packed(sample) - empty) / Buffer.byteLength(sample);
  const exact = packed(sample) > USER_DATA_MAX_BYTES;
  const fitBytes = exact ? Buffer.byteLength(sample.slice(0, longestFit(sample))) : Math.floor((USER_DATA_MAX_BYTES - empty) / cost);
  return { label, sampleBytes: Buffer.byteLength(sample), costPerKb: cost * 1000, fitBytes, exact };
}

/** SkyPilot's task files beside the repository, when they are there. */
const CORPUS = path.resolve(REPO_ROOT, '../shared/corpus/skypilot');

export const userDataBenchmark: Benchmark = {
  name: 'user-data: the agent in EC2 user data',
  async run(): Promise<BenchResult> {
    const rows = [
      { label: 'a one-line task', bytes: packed('echo hi', false) },
      { label: 'with S3 data (data credentials)', bytes: packed('echo hi') },
    ];
    const largest = Math.max(...rows.map((row) => row.bytes));
    const room = USER_DATA_MAX_BYTES - largest;
    const worst = longestFit(incompressible(USER_DATA_MAX_BYTES));
    const fits = [shellFit("the team's task files (examples/, test/support/fixtures/tasks/valid/)", shellOf(path.join(REPO_ROOT, 'examples')) + shellOf(path.join(REPO_ROOT, 'test/support/fixtures/tasks/valid')))];
    if (existsSync(CORPUS)) fits.push(shellFit(`SkyPilot's task files (${path.relative(REPO_ROOT, CORPUS)})`, shellOf(CORPUS)));
    const checks: TargetCheck[] = [{ target: `at least ${MIN_ROOM_BYTES} bytes left for setup, run and envs`, met: room >= MIN_ROOM_BYTES, detail: `${room} bytes left` }];
    const corpus = fits.find((fit) => fit.label.startsWith('SkyPilot'));
    if (corpus !== undefined) {
      // The figure the limit's message gives (ec2-user-data.ts) must stay the measured one, within a tenth.
      const off = Math.abs(corpus.fitBytes - ORDINARY_SHELL_FIT_BYTES) / corpus.fitBytes;
      checks.push({
        target: `the user data limit's message says what fits, ${ORDINARY_SHELL_FIT_BYTES} bytes of ordinary shell, within 10% of the measure`,
        met: off <= 0.1,
        detail: `measured ${corpus.fitBytes} bytes with SkyPilot's task files (${(off * 100).toFixed(1)}% off)`,
      });
    }
    return {
      lines: [
        '| agent for | bytes gzipped | of 16,384 |',
        '|---|---:|---:|',
        ...rows.map((row) => `| ${row.label} | ${row.bytes} | ${((100 * row.bytes) / USER_DATA_MAX_BYTES).toFixed(1)}% |`),
        '',
        '| setup and run of | sample bytes | gzipped bytes per 1,000 | largest that fits (with S3 data) |',
        '|---|---:|---:|---:|',
        `| text gzip cannot shrink (printable, random) | - | - | ${worst} bytes, tried |`,
        ...fits.map((fit) => `| ${fit.label} | ${fit.sampleBytes} | ${fit.costPerKb.toFixed(0)} | ${fit.exact ? `${fit.fitBytes} bytes, tried` : `about ${fit.fitBytes} bytes, from the cost per byte`} |`),
        ...(existsSync(CORPUS) ? [] : [`(${CORPUS} is absent: SkyPilot's files not measured)`]),
      ],
      checks,
    };
  },
};
