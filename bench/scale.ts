// The scale simulation as a benchmark: N jobs (SCALE_JOBS, 1,000 by default; 10,000 with
// `npm run bench:scale`) through the deployed state machine and the real use cases in
// virtual time, against AWS's limits (bench/scale/). Prints the outcome, the peaks, the
// counts and relaunch's cost per 1,000 jobs, and checks the targets of BENCHMARKS.md.
//
// The "before" runs: SCALE_PACE=off gives the launch pace a bucket far larger than EC2's
// (launches race EC2's throttle, as before the pace), SCALE_JOB_LIST=ALL meters
// JobListIndex projecting every attribute (every status write lands in its one partition).
// SCALE_SUBMIT_SECONDS (60 by default) spreads the submits over another span.

import { availableParallelism } from 'node:os';
import { LAUNCH_SLOT_PREFIX } from '../lib/adapters/dynamo-launch-pace.ts';
import { EC2_LAUNCH_PACE, type LaunchPaceConfig } from '../lib/launch-pace.ts';
import { renderControllerAsl } from '../infra/asl.ts';
import { DYNAMODB_PARTITION, LAMBDA_CONCURRENCY, PRICES, SPOT_PRICE_SHARE, AWS_LIMITS, VCPU_QUOTAS } from './scale/limits.ts';
import { costOf } from './scale/cost.ts';
import { MODEL, runScaleSimulation, type ScaleResult } from './scale/simulation.ts';
import type { JobListProjection } from './scale/metered-store.ts';
import type { Benchmark, BenchResult, TargetCheck } from './types.ts';

/** The pace switched off: a bucket far beyond EC2's (the schema's largest). */
const NO_PACE: LaunchPaceConfig = { burst: 100_000, perSecond: 10_000 };
/** Share of a partition's capacity the busiest second may use. */
const PARTITION_TARGET = 0.8;
/** Share of the launch bucket's rate the launches must reach while they queue. */
const PACE_TARGET = 0.9;
const WALL_TARGET_SECONDS = 600;

export const scaleBenchmark: Benchmark = {
  name: 'scale simulation',
  async run(): Promise<BenchResult> {
    const jobs = Number(process.env.SCALE_JOBS ?? 1000);
    const paceOff = process.env.SCALE_PACE === 'off';
    const projection: JobListProjection = process.env.SCALE_JOB_LIST === 'ALL' ? 'ALL' : 'KEYS_ONLY';
    const pace = paceOff ? NO_PACE : EC2_LAUNCH_PACE;
    const started = process.hrtime.bigint();
    const submitSeconds = Number(process.env.SCALE_SUBMIT_SECONDS ?? 60);
    const result = await runScaleSimulation({ jobs, seed: Number(process.env.SCALE_SEED ?? 1), asl: renderControllerAsl(), pace, jobListProjection: projection, submitSeconds });
    const wallSeconds = Number(process.hrtime.bigint() - started) / 1e9;
    return report(result, { paceOff, projection, wallSeconds, submitSeconds });
  },
};

function report(r: ScaleResult, run: { paceOff: boolean; projection: JobListProjection; wallSeconds: number; submitSeconds: number }): BenchResult {
  const cost = costOf(r);
  const lines: string[] = [];
  const n = (value: number, digits = 0) => value.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
  const usd = (value: number) => `$${value.toFixed(value < 1 ? 4 : 2)}`;
  const launch = AWS_LIMITS.ec2InstanceLaunches;
  lines.push(
    `${n(r.jobs)} jobs submitted within ${n(run.submitSeconds)} s; launch pace ${run.paceOff ? `off (a bucket of ${n(NO_PACE.burst)})` : `${n(launch.burst)} then ${launch.perSecond}/s`}; JobListIndex metered as ${run.projection}.`,
    `Wall time ${n(run.wallSeconds, 1)} s on ${availableParallelism()} CPUs for ${n(r.eventsRun)} events and ${n(r.virtualSeconds / 3600, 2)} h of virtual time.`,
    `Modelled: Lambda ms ${Object.entries(MODEL.lambdaMs).map(([fn, ms]) => `${fn} ${ms}`).join(', ')} (submit ${MODEL.submitMs}), ${MODEL.lambdaMemoryGb * 1024} MB each; boot ${MODEL.bootSeconds.join('-')} s; run ${MODEL.runSeconds.join('-')} s; ${MODEL.spotShare * 100}% spot; spot pools of 10-120 instances per zone and type.`,
    '',
    '| measure | value |',
    '|---|---:|',
  );
  const row = (measure: string, value: string) => lines.push(`| ${measure} | ${value} |`);
  const statuses = [...r.statuses.entries()].map(([status, count]) => `${status} ${n(count)}`).join(', ');
  row('jobs by status', statuses + (r.unfinished > 0 ? `, unfinished ${n(r.unfinished)}` : ''));
  row('FAILED jobs by cause', r.failedByCause.size === 0 ? 'none' : [...r.failedByCause.entries()].map(([cause, count]) => `${cause}: ${n(count)}`).join('; '));
  row('attempts launched / instances launched', `${n(r.attempts)} / ${n(r.instancesLaunched)}`);
  const paceWindow = r.lastJobStartSeconds - r.firstLaunchSeconds;
  const floor = Math.max(0, (r.instancesByLastJobStart - launch.burst) / launch.perSecond);
  const paceShare = floor === 0 ? 1 : floor / paceWindow;
  row('time until the last job started (its floor: (instances - 1,000) / 2)', `${n(r.lastJobStartSeconds)} s (${n(floor)} s for ${n(r.instancesByLastJobStart)} instances)`);
  row('launch pace achieved against the bucket', `${n(paceShare * 100, 1)}%`);
  const meanWait = r.launchesWaitedForPace === 0 ? 0 : r.sfn.launchPaceWaits / r.launchesWaitedForPace;
  row('launches that waited in WaitForLaunchPace / mean wait', `${n(r.launchesWaitedForPace)} / ${n(meanWait)} s`);
  row('EC2 CreateFleet calls / RequestLimitExceeded answers (retried by the adapter)', `${n(r.ec2.createFleetCalls)} / ${n(r.ec2.requestLimitExceeded)}`);
  row('instances EC2 refused for the launch bucket', n(r.ec2.instanceLaunchesThrottled));
  row('InsufficientInstanceCapacity / VcpuLimitExceeded answers', `${n(r.ec2.insufficientCapacity)} / ${n(r.ec2.vcpuLimitExceeded)}`);
  row(`peak vCPUs spot / on-demand (quota ${n(VCPU_QUOTAS.spot)} each)`, `${n(r.ec2.peakVcpus.spot)} / ${n(r.ec2.peakVcpus['on-demand'])}`);
  const byClass = peaksByClass(r.dynamo.peakWrites);
  for (const [cls, peak] of byClass) row(`peak writes per second, ${cls}`, `${n(peak.amount)} WCU (${n((peak.amount / DYNAMODB_PARTITION.writeUnitsPerSecond) * 100, 1)}% of ${n(DYNAMODB_PARTITION.writeUnitsPerSecond)})`);
  const readPeak = maxPeak(r.dynamo.peakReads);
  row('peak reads per second, any partition', `${n(readPeak.amount, 1)} RCU (${readPeak.key})`);
  row('DynamoDB calls throttled (retried)', `${n(r.dynamo.throttledCalls)}${r.dynamo.throttledByPartition.size > 0 ? ` (${[...r.dynamo.throttledByPartition.entries()].slice(0, 3).map(([p, c]) => `${p}: ${n(c)}`).join(', ')})` : ''}`);
  row(`peak Lambda concurrency (limit ${n(LAMBDA_CONCURRENCY.limit)}) / invocations throttled`, `${n(r.lambda.peakConcurrency)} / ${n(r.lambda.throttles)}`);
  row('StartExecution throttles absorbed (queued, started by the janitor)', `${n(r.startExecutionThrottles)} (janitor started ${n(r.janitorStarts)})`);
  row('per attempt: state transitions / DynamoDB writes / write units', `${n(r.sfn.transitions / r.attempts, 2)} / ${n(r.dynamo.writeCalls / r.attempts, 2)} / ${n(r.dynamo.writeUnits / r.attempts, 2)}`);
  row('state transitions (retries among them) / delayed by the bucket', `${n(r.sfn.transitions)} (${n(r.sfn.retries)}) / ${n(r.sfn.transitionsDelayed)}`);
  row('API requests (refused: API Gateway throttle or Lambda concurrency; retried by the caller)', `${n(r.api.requests)} (${n(r.api.throttled)})`);
  const errors = [...r.handlerErrors.entries(), ...r.agentErrors.entries()];
  if (errors.length > 0) row('unexpected errors', errors.slice(0, 5).map(([what, count]) => `${what} x${count}`).join('; '));
  lines.push('', `Cost at us-east-1 list prices of ${PRICES.date}:`, '', '| item | count | cost |', '|---|---:|---:|');
  for (const line of cost.relaunch) lines.push(`| ${line.item} | ${n(line.count)} | ${usd(line.dollars)} |`);
  lines.push(`| relaunch, total for ${n(r.jobs)} jobs | | ${usd(cost.relaunchTotal)} |`);
  lines.push(`| **relaunch per 1,000 jobs** | | **${usd(cost.relaunchPer1000Jobs)}** |`);
  lines.push(`| (SSM on higher throughput instead: + ${usd(cost.ssmHigherThroughput)}) | | |`);
  lines.push(`| the jobs' instances (spot at ${SPOT_PRICE_SHARE * 100}% of on-demand, assumed) | ${n(cost.instanceHours)} h | ${usd(cost.instancesTotal)} |`);
  lines.push(`| SkyPilot's controller (r6i.xlarge) for the sweep's ${n(cost.sweepHours, 2)} h | | ${usd(cost.skypilotForSweep)} |`);
  lines.push(`| SkyPilot's controller always on, a month | | ${usd(cost.skypilotMonthly)} |`);

  const bad = [...r.failedByCause.entries()].filter(([cause]) => /throttling|controller/.test(cause) || cause.startsWith('FAILED_CONTROLLER'));
  const badCount = bad.reduce((sum, [, count]) => sum + count, 0);
  const worstWrite = maxPeak(r.dynamo.peakWrites);
  const checks: TargetCheck[] = [
    { target: 'every job reaches a terminal status', met: r.unfinished === 0, detail: `${n(r.jobs - r.unfinished)} of ${n(r.jobs)}` },
    { target: '0 jobs FAILED for throttling or controller faults', met: badCount === 0, detail: badCount === 0 ? 'none' : bad.map(([cause, count]) => `${cause}: ${count}`).join('; ') },
    { target: `launch pace >= ${PACE_TARGET * 100}% of the bucket's`, met: paceShare >= PACE_TARGET, detail: `${n(paceShare * 100, 1)}% (last job started at ${n(r.lastJobStartSeconds)} s, floor ${n(floor)} s)` },
    { target: 'EC2 never refuses an instance for the launch bucket', met: r.ec2.instanceLaunchesThrottled === 0, detail: `${n(r.ec2.instanceLaunchesThrottled)} refused` },
    {
      target: `peak writes <= ${PARTITION_TARGET * 100}% of a partition's ${n(DYNAMODB_PARTITION.writeUnitsPerSecond)} WCU, every partition, every second`,
      met: worstWrite.amount <= PARTITION_TARGET * DYNAMODB_PARTITION.writeUnitsPerSecond,
      detail: `${n(worstWrite.amount)} WCU in ${worstWrite.key}`,
    },
    { target: `Lambda concurrency below ${n(LAMBDA_CONCURRENCY.limit)}`, met: r.lambda.throttles === 0, detail: `peak ${n(r.lambda.peakConcurrency)}` },
    {
      target: 'StartExecution throttles absorbed',
      met: r.unfinished === 0,
      detail: `${n(r.startExecutionThrottles)} throttled starts, ${n(r.janitorStarts)} started by the janitor; ${r.unfinished === 0 ? 'every job ended' : `${n(r.unfinished)} jobs never ended`}`,
    },
    { target: `wall time < ${WALL_TARGET_SECONDS / 60} min`, met: run.wallSeconds < WALL_TARGET_SECONDS, detail: `${n(run.wallSeconds, 1)} s` },
  ];
  return { lines, checks };
}

/** The busiest second of any partition, and which. */
function maxPeak(peaks: ReadonlyMap<string, { amount: number }>): { key: string; amount: number } {
  let best = { key: 'none', amount: 0 };
  for (const [key, peak] of peaks) if (peak.amount > best.amount) best = { key, amount: peak.amount };
  return best;
}

/**
 * The busiest second per kind of partition: a job's, a launch slot's, InstanceIndex's
 * (many of each), and each of JobListIndex's, QueueIndex's and the launch pace's.
 */
function peaksByClass(peaks: ReadonlyMap<string, { amount: number }>): Map<string, { amount: number }> {
  const out = new Map<string, { amount: number }>();
  for (const [key, peak] of peaks) {
    const cls = key.startsWith('table JOB#')
      ? "a job's partition"
      : key.startsWith(`table ${LAUNCH_SLOT_PREFIX}`)
        ? "a launch slot's item"
        : key.startsWith('InstanceIndex ')
          ? 'an InstanceIndex partition'
          : key;
    if ((out.get(cls)?.amount ?? -1) < peak.amount) out.set(cls, { amount: peak.amount });
  }
  return out;
}
