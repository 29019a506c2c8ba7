// `relaunch status`, `logs` and `cancel` end to end: the real binary against the local
// server that owns a data folder (`relaunch serve`, or the background one `run --detach` starts).

import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isTerminal } from '../../../lib/status.ts';
import type { JobSummary, JobView } from '../../../lib/views.ts';
import {
  isAlive,
  killStrayClis,
  parseStdout,
  processGroupOf,
  removeTempDirs,
  runCli,
  serverInfo,
  SLOW,
  startCli,
  stopServer,
  tempDir,
  waitFor,
  waitForGroupGone,
  waitForOutput,
  waitForPid,
  writeTask,
  type Cli,
} from '../../support/cli.ts';

afterAll(async () => {
  killStrayClis();
  await removeTempDirs();
});

/** Fails once with exit 1, then succeeds; each attempt says which it is. */
const TWO_TRIES = [
  'name: two-tries',
  'resources:',
  '  job_recovery:',
  '    max_restarts_on_errors: 1',
  'run: |',
  '  echo "output of attempt $RELAUNCH_ATTEMPT"',
  '  if [ "$RELAUNCH_ATTEMPT" -eq 1 ]; then exit 1; fi',
  '',
].join('\n');

describe.concurrent('status and logs of a finished job, through `relaunch serve`', { timeout: SLOW }, () => {
  let dir: string;
  let data: string;
  let server: Cli;
  let job: JobView;
  const cli = (...args: string[]) => runCli([...args, '--data-dir', data], { cwd: dir });

  beforeAll(async () => {
    dir = await tempDir('status');
    data = join(dir, 'data');
    server = startCli(['serve', '--port', '0', '--data-dir', data], { cwd: dir });
    await waitForOutput(server, /^relaunch API on /m);
    const task = await writeTask(dir, 'two-tries.yaml', TWO_TRIES);
    const run = await cli('run', task, '--json');
    expect(run.code, run.stderr).toBe(0);
    job = parseStdout<JobView>(run);
  }, SLOW);

  afterAll(async () => {
    server.child.kill('SIGINT');
    expect((await server.finished).code).toBe(0);
  });

  it("status prints the queue as sky jobs queue does: a line of the jobs in progress, then a row per job", async () => {
    const result = await cli('status');
    expect(result.code, result.stderr).toBe(0);
    const [progress, header, ...rows] = result.stdout.trimEnd().split('\n');
    expect(progress).toBe('no job in progress');
    expect(header?.split(/\s{2,}/)).toEqual(['ID', 'NAME', 'RESOURCES', 'SUBMITTED', 'TOT. DURATION', 'JOB DURATION', 'COST', 'ATTEMPTS', 'RECOVERIES', 'STATUS']);
    expect(rows).toHaveLength(1);
    expect(rows[0]?.split(/\s{2,}/)).toEqual([
      job.jobId,
      'two-tries',
      '1x local-process on-demand',
      expect.stringMatching(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [A-Z]/),
      expect.stringMatching(/^\d+s$/),
      expect.stringMatching(/^\d+s$/),
      // A local job's cost is the estimate for the type it would use on AWS: marked ~.
      expect.stringMatching(/^~\$\d+\.\d+$/),
      '2',
      '1',
      'SUCCEEDED',
    ]);
  });

  it('status, logs and cancel take the job by its name', async () => {
    const status = await cli('status', 'two-tries', '--json');
    expect(status.code, status.stderr).toBe(0);
    expect(parseStdout<JobView>(status).jobId).toBe(job.jobId);
    const logs = await cli('logs', 'two-tries');
    expect(logs).toMatchObject({ code: 0, stdout: 'output of attempt 2\n' });
    const cancel = await cli('cancel', 'two-tries');
    expect(cancel).toMatchObject({ code: 0, stdout: `${job.jobId}: already ended SUCCEEDED, nothing to cancel\n` });
    const filtered = await cli('status', '--name', 'two-tries', '--status', 'FAILED');
    expect(filtered.stdout).toBe('no job in progress\nno job matches (relaunch status with no filter lists them all)\n');
  });

  it('status --json answers {jobs: [...]}', async () => {
    const result = await cli('status', '--json');
    expect(result.code, result.stderr).toBe(0);
    const { jobs } = parseStdout<{ jobs: JobSummary[] }>(result);
    expect(jobs).toEqual([
      {
        jobId: job.jobId,
        name: 'two-tries',
        status: 'SUCCEEDED',
        recoveryCount: 1,
        restartsOnErrors: 1,
        maxRestartsOnErrors: 1,
        attemptCount: 2,
        createdAt: expect.any(String),
        updatedAt: expect.any(String),
      },
    ]);
  });

  it('status JOB shows every attempt: outcome, phase, exit codes, decision, duration, the gap before its run and reason', async () => {
    const result = await cli('status', job.jobId);
    expect(result.code, result.stderr).toBe(0);
    const lines = result.stdout.trimEnd().split('\n');
    expect(lines[0]).toBe(`job:      ${job.jobId} (two-tries)`);
    expect(lines[1]).toBe('status:   SUCCEEDED');
    expect(lines[2]).toBe('recoveries: 1, restarts on errors: 1 of 1');
    const [tableLines, accountLines] = [lines.slice(lines.indexOf('') + 1, lines.lastIndexOf('')), lines.slice(lines.lastIndexOf('') + 1)];
    const table = tableLines.map((line) => line.split(/\s{2,}/));
    expect(table).toEqual([
      ['ATTEMPT', 'OUTCOME', 'PHASE', 'EXIT CODES', 'DECISION', 'DURATION', 'GAP', 'REASON'],
      ['1', 'EXITED', 'run', '1', 'RESTART', expect.stringMatching(/^\d+\.\ds$/), '-', 'exit code 1 (run); restart 1 of 1 on errors, 0 left'],
      ['2', 'EXITED', 'run', '0', 'SUCCEED', expect.stringMatching(/^\d+\.\ds$/), expect.stringMatching(/^\d+\.\ds$/), 'exit code 0 (run); job succeeded'],
    ]);
    // Then where the time and money went (docs/goodput-and-cost.md): the summary line first.
    // Priced locally as an estimate, for the type the task would use on AWS.
    expect(accountLines[0]).toMatch(/^goodput \d+% · 1 recovery · ~\$[\d.]+ on demand, estimated$/);
    expect(accountLines[1]).toMatch(/^wall time [\d.]+s; run time lost [\d.]+s$/);
  });

  it('status JOB --json is the object run --json printed, but for the release recorded after the job ended', async () => {
    const result = await cli('status', job.jobId, '--json');
    expect(result.code, result.stderr).toBe(0);
    // run prints the job as it ends; the data folder's runtime, in the background, then
    // releases the last attempt's node and records when it asked it to stop and when it was gone.
    const beforeRelease = (value: unknown): unknown =>
      JSON.parse(JSON.stringify(value), (key: string, field: unknown) => (key === 'stopAskedAt' || key === 'instancesGoneAt' ? null : field));
    expect(beforeRelease(parseStdout(result))).toEqual(beforeRelease(job));
  });

  it("logs JOB prints the latest attempt's output, --attempt N that attempt's", async () => {
    const latest = await cli('logs', job.jobId);
    expect(latest.code, latest.stderr).toBe(0);
    expect(latest.stdout).toBe('output of attempt 2\n');
    const first = await cli('logs', job.jobId, '--attempt', '1');
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toBe('output of attempt 1\n');
  });

  it("logs JOB --controller prints the controller's timeline: each launch, end and decision with its reason and time", async () => {
    const result = await cli('logs', job.jobId, '--controller');
    expect(result.code, result.stderr).toBe(0);
    const lines = result.stdout.trimEnd().split('\n');
    const timed = lines.filter((line) => /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+ {2}/.test(line)).map((line) => line.replace(/^\S+ \S+ \S+ {2}/, ''));
    // A local serve gives the job's status changes too (GET /_local/events/{job}).
    expect(timed).toEqual([
      'status new -> PENDING: job created',
      'status PENDING -> STARTING (attempt 1): launching attempt 1 (on-demand)',
      'attempt 1 launched, on-demand, local-process in local',
      'status STARTING -> RUNNING (attempt 1): the agent of attempt 1 is up',
      'attempt 1: run started',
      'attempt 1 ended EXITED in run, exit codes 1',
      'attempt 1 decided RESTART (RESTART_ON_ERROR): exit code 1 (run); restart 1 of 1 on errors, 0 left',
      'status RUNNING -> RECOVERING (attempt 1): exit code 1 (run); restart 1 of 1 on errors, 0 left',
      'status RECOVERING -> STARTING (attempt 2): launching attempt 2 (on-demand)',
      'attempt 2 launched, on-demand, local-process in local',
      'status STARTING -> RUNNING (attempt 2): the agent of attempt 2 is up',
      'attempt 2: run started',
      'attempt 2 ended EXITED in run, exit codes 0',
      'attempt 2 decided SUCCEED (ALL_EXITED_ZERO): exit code 0 (run); job succeeded',
      'status RUNNING -> SUCCEEDED (attempt 2): exit code 0 (run); job succeeded',
    ]);
    expect(result.stdout).not.toContain('does not serve the job');
    const times = lines.slice(0, timed.length).map((line) => line.split('  ')[0] as string);
    expect([...times].sort()).toEqual(times);
    expect(await cli('logs', job.jobId, '--controller', '--attempt', '1')).toMatchObject({ code: 2, stderr: expect.stringContaining('--controller: prints the whole job') });
  });

  it('logs --attempt past the last attempt is bad input (2)', async () => {
    const result = await cli('logs', job.jobId, '--attempt', '3');
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain('--attempt: expected 1-2, got 3');
  });

  it('cancel of a finished job changes nothing and says how it ended', async () => {
    const result = await cli('cancel', job.jobId);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toBe(`${job.jobId}: already ended SUCCEEDED, nothing to cancel\n`);
  });

  it.each(['status', 'logs', 'cancel'])('%s of an unknown job exits 2 naming the id', async (command) => {
    const result = await cli(command, 'j-0000000aa-nojob0');
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toBe('error: no job with id j-0000000aa-nojob0\n');
  });

  it.each(['status', 'logs', 'cancel'])('%s of a name no job has exits 2 naming it', async (command) => {
    const result = await cli(command, 'j-no-such-job');
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toBe('error: <job>: no job named j-no-such-job (nor with that id): relaunch status lists the jobs\n');
  });
});

// Not concurrent with the tests above: the background server must start within the 15 s
// `run --detach` waits for it.
describe('cancel of a detached running job', { timeout: SLOW }, () => {
  it('ends it CANCELLED with its processes gone; the background server exits by itself once nothing runs', async () => {
    const dir = await tempDir('cancel');
    const data = join(dir, 'data');
    const pidfile = join(dir, 'pid');
    const gate = join(dir, 'gate');
    const cli = (...args: string[]) => runCli([...args, '--data-dir', data], { cwd: dir });
    const long = await writeTask(
      dir,
      'long.yaml',
      ['name: long', 'run: |', '  echo $$ > "$PIDFILE"', '  sleep 60 &', '  echo $! > "$PIDFILE.child"', '  echo started', '  wait', ''].join('\n'),
    );
    // A second job keeps the background server up (it exits once no job is live) until the gate opens.
    const gated = await writeTask(dir, 'gated.yaml', ['name: gated', 'run: |', `  while [ ! -f ${gate} ]; do sleep 0.1; done`, ''].join('\n'));

    const detached = await cli('run', long, '--detach', '--env', `PIDFILE=${pidfile}`);
    expect(detached.code, detached.stderr).toBe(0);
    const jobId = detached.stdout.trim();
    const server = serverInfo(data);
    try {
      const keeper = await cli('run', gated, '--detach');
      expect(keeper.code, keeper.stderr).toBe(0);
      expect(serverInfo(data)).toEqual(server);
      const shell = await waitForPid(pidfile);
      const child = await waitForPid(`${pidfile}.child`);
      const group = processGroupOf(shell);

      const cancelled = await cli('cancel', jobId);
      expect(cancelled.code, cancelled.stderr).toBe(0);
      expect(cancelled.stdout).toMatch(new RegExp(`^${jobId}: CANCELL(ING|ED)\n$`));

      const view = await waitFor('the job to end', async () => {
        const status = parseStdout<JobView>(await cli('status', jobId, '--json'));
        return isTerminal(status.status) ? status : undefined;
      });
      expect(view).toMatchObject({
        status: 'CANCELLED',
        failureReason: expect.stringContaining('cancelled'),
        attempts: [{ attempt: 1, outcome: 'CANCELLED', decision: 'FAIL' }],
      });
      await waitForGroupGone(group);
      expect(isAlive(shell)).toBe(false);
      expect(isAlive(child)).toBe(false);
      expect((await cli('logs', jobId)).stdout).toBe('started\n');

      await writeFile(gate, '');
      const { pid } = server as { pid: number };
      await waitFor('the background server to remove server.json', () => (serverInfo(data) === undefined ? true : undefined));
      await waitFor('the background server to exit', () => (isAlive(pid) ? undefined : true));
    } finally {
      stopServer(server);
    }
  });
});
