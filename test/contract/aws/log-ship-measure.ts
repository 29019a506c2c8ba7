// The agent's shipper to CloudWatch Logs (lib/agent/agent.sh, section 5) against
// moto_server: the shipped agent, run by bash as cloud-init runs it, with a stand-in API and
// instance metadata (test/support/agent-harness.ts's FakeApi), shipping to moto's
// CloudWatch Logs at the shipper's own pace (a look every 2 s). It prints one JSON line:
// - throughputMBps: a job printing 10 MiB as fast as bash can; MB shipped per second, from
//   the run's first line to CloudWatch's answer to its last batch (the shipper says when);
// - cpuSecondsPerMB: the run shipper's CPU (its own and its children's: awk, dd, curl,
//   openssl, sha256sum), as it says at its end, per MB shipped;
// - p99LatencyMs: a job printing a line every 100 ms for 30 s, each line's print to the
//   moment a reader polling GetLogEvents every 100 ms first sees it;
// - slowdownRatio: a CPU-bound job's own run time with shipping over without (the median
//   of seven each, alternating), in one run.
//
// `npm run bench -- log-ship` runs this program (about two and a half minutes) and judges its
// figures (bench/log-ship.ts): a benchmark may not import the tests' harness, so it runs it.

import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CloudWatchLogsClient, CreateLogGroupCommand, GetLogEventsCommand } from '@aws-sdk/client-cloudwatch-logs';
import { renderAgentScript } from '../../../lib/agent/script.ts';
import { agentSecretName } from '../../../lib/agent/secret-parameter.ts';
import { jobLogGroupName, jobLogStreamName } from '../../../lib/job-log-names.ts';
import { FakeApi, INSTANCE_ARN, INSTANCE_ID, SECRET, SECRET_PATH, spec } from '../../support/agent-harness.ts';
import { startMoto } from './moto.ts';
import { fileURLToPath } from 'node:url';
import type { LogShipMeasure } from '../../../bench/log-ship.ts';
import { median } from '../../../bench/stats.ts';

const REGION = 'us-east-1';
const GROUP = jobLogGroupName('bench');
const MB = 1_000_000;


/** 10 MiB in 64 KiB blocks of lines 1 to 200 bytes long, printed by bash's own printf; the clock starts at the first block. */
const FLOOD = [
  'block=""; n=0',
  'while [ "${#block}" -lt 65536 ]; do n=$((n + 1)); printf -v line "%0$((n % 200))d" "$n"; block+="$line"$\'\\n\'; done',
  'date +%s%N > "$BENCH_DIR/run-started"',
  'for i in $(seq 1 160); do printf "%s" "$block"; done',
].join('\n');

/** A line every 100 ms for 30 s, each carrying its print time in ms. */
const TICKS = 'for i in $(seq 1 300); do printf "tick %d %s\\n" "$i" "$(date +%s%3N)"; sleep 0.1; done';

/** About 3 s of arithmetic in bash on a quiet core, a progress line every 20,000 steps; its own run time in ms last. */
const CPU_BOUND = [
  'started=$(date +%s%3N)',
  'x=0; for ((i = 1; i <= 1500000; i++)); do x=$(( (x * 31 + i) % 1000003 )); if (( i % 20000 == 0 )); then echo "step $i x=$x"; fi; done',
  'echo "took $(( $(date +%s%3N) - started ))"',
].join('\n');

interface AgentRun {
  readonly dir: string;
  readonly jobId: string;
  readonly endedAt: number;
}

/** Runs the three jobs against moto and measures them. */
export async function measureLogShipping(): Promise<LogShipMeasure> {
    const moto = await startMoto();
    const api = new FakeApi();
    const apiUrl = await api.start();
    api.parameters.put(agentSecretName(SECRET_PATH, INSTANCE_ID), SECRET, INSTANCE_ARN);
    api.logCredentials = { Version: 1, AccessKeyId: 'AKIABENCH', SecretAccessKey: 'bench', SessionToken: 'bench', Expiration: new Date(Date.now() + 3_600_000).toISOString() };
    const logs = new CloudWatchLogsClient({ region: REGION, endpoint: moto.endpoint, credentials: { accessKeyId: 'AKIABENCH', secretAccessKey: 'bench' } });
    await logs.send(new CreateLogGroupCommand({ logGroupName: GROUP }));
    const root = mkdtempSync(path.join(tmpdir(), 'relaunch-bench-ship-'));
    let runs = 0;

    /** Runs the agent for a job whose run is `run`, shipping unless `ship` is false; resolves when it has ended. */
    const runAgent = async (run: string, ship = true, onStart?: (jobId: string, dir: string) => void): Promise<AgentRun> => {
      runs += 1;
      const jobId = `bench-${runs}`;
      const dir = path.join(root, jobId);
      const script = renderAgentScript({
        apiUrl,
        jobId,
        attempt: 1,
        secretSource: { path: SECRET_PATH, region: REGION, endpoint: `${apiUrl}/ssm` },
        spec: spec({ setup: '', run }),
        heartbeatSeconds: 5,
        nodeRank: 0,
        nodeIps: ['10.0.0.1'],
        rootDir: path.join(dir, 'agent'),
        imdsUrl: apiUrl,
        interruptionPollSeconds: 0,
        shutdownCommand: 'true',
        ...(ship ? { logs: { group: GROUP, region: REGION, endpoint: moto.endpoint } } : {}),
      });
      rmSync(dir, { recursive: true, force: true });
      const agentDir = path.join(dir, 'agent');
      mkdirSync(agentDir, { recursive: true });
      writeFileSync(path.join(dir, 'agent.sh'), script);
      const child = spawn('bash', [path.join(dir, 'agent.sh')], { env: { PATH: process.env.PATH ?? '', HOME: dir, BENCH_DIR: dir }, stdio: 'ignore' });
      onStart?.(jobId, dir);
      await new Promise((resolve) => child.once('close', resolve));
      return { dir, jobId, endedAt: Date.now() };
    };

    try {
      // Throughput and CPU: 10 MiB as fast as bash prints it.
      const flood = await runAgent(FLOOD);
      const started = Number(readFileSync(path.join(flood.dir, 'run-started'), 'utf8').trim()) / 1e6;
      const shipLine = /shipped (\d+) bytes of the run log in (\d+) calls, the last acknowledged at (\d+) \(CPU: ([^)]*)\)/.exec(readFileSync(path.join(flood.dir, 'agent', 'ship.log'), 'utf8'));
      if (shipLine === null) throw new Error('the run shipper did not say what it shipped');
      const shipped = Number(shipLine[1]);
      const lastAt = Number(shipLine[3]);
      const cpuSeconds = shipLine[4]!.split(' ').reduce((sum, time) => sum + seconds(time), 0);
      const throughputMBps = shipped / MB / ((lastAt - started) / 1000);
      const cpuSecondsPerMB = cpuSeconds / (shipped / MB);

      // Latency: a reader polling GetLogEvents every 100 ms, as a follower would.
      const seen = new Map<number, number>();
      const printed = new Map<number, number>();
      let polling = true;
      let poller: Promise<void> = Promise.resolve();
      await runAgent(TICKS, true, (jobId) => {
        poller = (async () => {
          let token: string | undefined;
          const stream = jobLogStreamName({ jobId, attempt: 1, nodeRank: 0, phase: 'run' });
          // On after the agent's end until every line is seen (10 s at most): its last batch may land just before.
          let stopAt = Number.POSITIVE_INFINITY;
          while (polling || (seen.size < 300 && Date.now() < stopAt)) {
            if (!polling && stopAt === Number.POSITIVE_INFINITY) stopAt = Date.now() + 10_000;
            try {
              const page = await logs.send(new GetLogEventsCommand({ logGroupName: GROUP, logStreamName: stream, startFromHead: true, nextToken: token }));
              const now = Date.now();
              for (const event of page.events ?? []) {
                for (const match of (event.message ?? '').matchAll(/^tick (\d+) (\d+)$/gm)) {
                  const tick = Number(match[1]);
                  if (!seen.has(tick)) seen.set(tick, now);
                  printed.set(tick, Number(match[2]));
                }
              }
              token = page.nextForwardToken ?? token;
            } catch {
              // The stream does not exist yet.
            }
            await new Promise((resolve) => setTimeout(resolve, 100));
          }
        })();
      });
      polling = false;
      await poller;
      const latencies = [...seen.entries()].map(([tick, at]) => at - (printed.get(tick) ?? at));
      const p99LatencyMs = latencies.length === 300 ? percentile(latencies, 99) : Number.POSITIVE_INFINITY;

      // Slowdown: the same CPU-bound job with and without shipping, alternating.
      const took = (run: AgentRun) => Number(/^took (\d+)$/m.exec(readFileSync(path.join(run.dir, 'agent', 'run.log'), 'utf8'))?.[1]);
      const without: number[] = [];
      const withShipping: number[] = [];
      for (let round = 0; round < 7; round += 1) {
        without.push(took(await runAgent(CPU_BOUND, false)));
        withShipping.push(took(await runAgent(CPU_BOUND, true)));
      }
      const slowdownRatio = median(withShipping) / median(without);

      return {
        figures: { throughputMBps: round2(throughputMBps), cpuSecondsPerMB: round3(cpuSecondsPerMB), p99LatencyMs: Math.round(p99LatencyMs), slowdownRatio: round3(slowdownRatio) },
        lines: [
          `10 MiB run: ${shipped} bytes shipped in ${shipLine[2]} calls, ${round3(cpuSeconds)} s of the shipper's CPU; its first line to the last batch acknowledged ${lastAt - Math.round(started)} ms, to the agent's end ${flood.endedAt - Math.round(started)} ms`,
          `ticks seen: ${latencies.length} of 300; median ${Math.round(median(latencies))} ms, p99 ${Math.round(p99LatencyMs)} ms, max ${Math.max(...latencies)} ms`,
          `CPU-bound run times (ms): without shipping ${without.join(', ')}; with ${withShipping.join(', ')}`,
        ],
      };
    } finally {
      await api.stop();
      await moto.stop();
      rmSync(root, { recursive: true, force: true });
    }
}


/** bash's `times` figure (`0m1.250s`) in seconds. */
function seconds(time: string): number {
  const match = /^(\d+)m([\d.]+)s$/.exec(time);
  return match === null ? 0 : Number(match[1]) * 60 + Number(match[2]);
}

/** The nearest-rank percentile p of values. */
function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;
}

const round2 = (n: number) => Math.round(n * 100) / 100;
const round3 = (n: number) => Math.round(n * 1000) / 1000;

// Run as a program (by the benchmark): one JSON line, the measure.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  process.stdout.write(`${JSON.stringify(await measureLogShipping())}\n`);
}
