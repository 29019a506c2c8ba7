// `relaunch run` end to end: the real binary runs every example through the real state
// machine (jobs as process groups), --json and human output, --env, bad input, --detach,
// and Ctrl-C / SIGTERM cancelling the job it runs.

import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import net from 'node:net';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { main } from '../../../cli/main.ts';
import { isTerminal } from '../../../lib/status.ts';
import type { JobView } from '../../../lib/views.ts';
import {
  EXAMPLES,
  isAlive,
  killStrayClis,
  parseStdout,
  processGroupOf,
  removeTempDirs,
  runCli, runInProcess,
  serverInfo,
  SLOW,
  startCli,
  stopServer,
  tempDir,
  waitFor,
  waitForGroupGone,
  waitForPid,
  writeTask,
  bufferIo,
} from '../../support/cli.ts';

// Not afterEach: tests run concurrently, and each waits for its own processes to end.
afterAll(async () => {
  killStrayClis();
  await removeTempDirs();
});

/** What each example must end as, per the comments at its top. */
const EXAMPLE_RUNS = [
  {
    example: 'recover-on-exit-code',
    args: [],
    exitStatus: 0,
    job: { status: 'SUCCEEDED', recoveryCount: 2, restartsOnErrors: 0 },
    attempts: [
      { outcome: 'EXITED', phase: 'run', exitCodes: [29], decision: 'RESTART', reason: 'exit code 29 (run) is in recover_on_exit_codes; restart 1, unlimited' },
      { outcome: 'EXITED', phase: 'run', exitCodes: [29], decision: 'RESTART', reason: 'exit code 29 (run) is in recover_on_exit_codes; restart 2, unlimited' },
      { outcome: 'EXITED', phase: 'run', exitCodes: [0], decision: 'SUCCEED', reason: 'exit code 0 (run); job succeeded' },
    ],
  },
  {
    example: 'max-restarts',
    args: [],
    exitStatus: 0,
    job: { status: 'SUCCEEDED', recoveryCount: 2, restartsOnErrors: 2 },
    attempts: [
      { outcome: 'EXITED', phase: 'run', exitCodes: [1], decision: 'RESTART', reason: 'exit code 1 (run); restart 1 of 2 on errors, 1 left' },
      { outcome: 'EXITED', phase: 'run', exitCodes: [1], decision: 'RESTART', reason: 'exit code 1 (run); restart 2 of 2 on errors, 0 left' },
      { outcome: 'EXITED', phase: 'run', exitCodes: [0], decision: 'SUCCEED', reason: 'exit code 0 (run); job succeeded' },
    ],
  },
  {
    example: 'fail-fast',
    args: [],
    exitStatus: 1,
    job: { status: 'FAILED', recoveryCount: 0, restartsOnErrors: 0 },
    attempts: [{ outcome: 'EXITED', phase: 'run', exitCodes: [3], decision: 'FAIL', reason: expect.stringContaining('exit code 3 (run) is in fail_on_exit_codes') }],
  },
  {
    example: 'setup-failure',
    args: [],
    exitStatus: 1,
    job: { status: 'FAILED_SETUP', recoveryCount: 1 },
    attempts: [
      { outcome: 'EXITED', phase: 'setup', exitCodes: [1], decision: 'RESTART', reason: 'exit code 1 (setup); restart 1 of 1 on errors, 0 left' },
      { outcome: 'EXITED', phase: 'setup', exitCodes: [1], decision: 'FAIL', reason: expect.stringContaining('max_restarts_on_errors (1) used up') },
    ],
  },
  {
    example: 'spot-preemption',
    args: ['--preempt-attempts', '1'],
    exitStatus: 0,
    job: { status: 'SUCCEEDED', recoveryCount: 1, restartsOnErrors: 0 },
    attempts: [
      { outcome: 'PREEMPTED', phase: 'run', exitCodes: [null], decision: 'RECOVER', reason: expect.stringContaining('does not count toward max_restarts_on_errors') },
      { outcome: 'EXITED', phase: 'run', exitCodes: [0], decision: 'SUCCEED' },
    ],
  },
  {
    example: 'restart-in-place',
    args: ['--boot', '2s'],
    exitStatus: 0,
    job: { status: 'SUCCEEDED', recoveryCount: 1, restartsOnErrors: 0 },
    attempts: [
      { outcome: 'EXITED', phase: 'run', exitCodes: [29], decision: 'RESTART', reason: expect.stringContaining('in place on the same node, setup skipped') },
      { outcome: 'EXITED', phase: 'run', exitCodes: [0], decision: 'SUCCEED' },
    ],
    // Attempt 2 ran on attempt 1's node without its setup.
    logs: [{ attempt: 2, has: ['setup skipped: it ran on this node in attempt 1', 'finished the work'], lacks: ["installing the job's dependencies"] }],
  },
  {
    example: 'checkpointing',
    args: [],
    exitStatus: 0,
    job: { status: 'SUCCEEDED', recoveryCount: 1, restartsOnErrors: 0 },
    attempts: [
      { outcome: 'EXITED', phase: 'run', exitCodes: [29], decision: 'RESTART', reason: expect.stringContaining('exit code 29 (run) is in recover_on_exit_codes') },
      { outcome: 'EXITED', phase: 'run', exitCodes: [0], decision: 'SUCCEED' },
    ],
    // The second attempt starts from the checkpoint the first one left, not from step 1.
    logs: [{ attempt: 2, has: ['resuming from checkpoint at step 4', 'step 5/8', 'training complete after 8 steps'], lacks: ['step 1/8'] }],
  },
  {
    example: 'checkpoint-bucket',
    args: [],
    exitStatus: 0,
    job: { status: 'SUCCEEDED', recoveryCount: 1, restartsOnErrors: 0 },
    attempts: [
      { outcome: 'EXITED', phase: 'run', exitCodes: [29], decision: 'RESTART', reason: expect.stringContaining('exit code 29 (run) is in recover_on_exit_codes') },
      { outcome: 'EXITED', phase: 'run', exitCodes: [0], decision: 'SUCCEED' },
    ],
    // The second attempt, on a node of its own, reads what the first wrote to the bucket.
    logs: [{ attempt: 2, has: ["resuming from the bucket's checkpoint at step 4", 'step 5/8', 'training complete after 8 steps'], lacks: ['step 1/8'] }],
  },
];

describe.concurrent('relaunch run --json on each example', { timeout: SLOW }, () => {
  it.each(EXAMPLE_RUNS)('$example ends $job.status with exit status $exitStatus', async ({ example, args, exitStatus, job, attempts, logs }) => {
    const dir = await tempDir('run');
    const data = join(dir, 'data');
    const result = await runCli(['run', join(EXAMPLES, `${example}.yaml`), '--json', '--data-dir', data, ...args], { cwd: dir });

    expect(result.code, result.stderr).toBe(exitStatus);
    // Nothing on stderr but the bucket folder `run` creates for a MOUNT (checkpoint-bucket), and
    // the notice that a task's setup runs on this machine (its data folder is new).
    const notice = (line: string): boolean => line.startsWith('relaunch: this run is local, ') || line.startsWith('relaunch:   ');
    expect(result.stderr.split('\n').filter((line) => line !== '' && !line.startsWith('created bucket folder ') && !notice(line))).toEqual([]);
    const view = parseStdout<JobView>(result);
    expect(view).toMatchObject({ name: example, ...job, attempts: attempts.map((attempt, index) => ({ attempt: index + 1, ...attempt })) });
    expect(Object.keys(view)).toEqual(expect.arrayContaining(['jobId', 'name', 'status', 'recoveryCount', 'restartsOnErrors', 'attempts']));
    for (const attempt of view.attempts) {
      expect(Object.keys(attempt)).toEqual(expect.arrayContaining(['attempt', 'outcome', 'phase', 'exitCodes', 'decision', 'reason']));
    }
    // The background runtime that ran the job goes once idle, and says so by removing its server.json.
    await waitFor('the background runtime to go once idle', () => (serverInfo(data) === undefined ? true : undefined));
    // `relaunch logs` with no server running opens the data folder itself.
    for (const { attempt, has, lacks } of logs ?? []) {
      const log = await runInProcess(['logs', view.jobId, '--attempt', String(attempt), '--data-dir', data]);
      expect(log.code, log.stderr).toBe(0);
      for (const text of has) expect(log.stdout).toContain(text);
      for (const text of lacks) expect(log.stdout).not.toContain(text);
    }
  });
});

describe.concurrent('relaunch run, human output and --env', { timeout: SLOW }, () => {
  it('prints status changes, each decision with its reason, and the output of every attempt, in order', async () => {
    const dir = await tempDir('run');
    const task = await writeTask(
      dir,
      'flaky.yaml',
      [
        'name: flaky',
        'envs:',
        '  GREETING: from-the-file',
        'resources:',
        '  job_recovery:',
        '    max_restarts_on_errors: 1',
        'run: |',
        '  echo "attempt $RELAUNCH_ATTEMPT says $GREETING, extra $EXTRA"',
        '  if [ "$RELAUNCH_ATTEMPT" -eq 1 ]; then echo "attempt 1 gives up" >&2; exit 1; fi',
        '',
      ].join('\n'),
    );
    const result = await runCli(['run', task, '--data-dir', join(dir, 'data'), '--env', 'GREETING=from-the-cli', '--env', 'EXTRA=a=b'], { cwd: dir });

    expect(result.code, result.stderr).toBe(0);
    const out = result.stdout;
    // --env overrides the file's envs and reaches the job; a value may itself hold '='.
    const first = out.indexOf('attempt 1 says from-the-cli, extra a=b');
    const gaveUp = out.indexOf('attempt 1 gives up');
    const decision = out.indexOf('exit code 1 (run); restart 1 of 1 on errors, 0 left');
    const second = out.indexOf('attempt 2 says from-the-cli, extra a=b');
    const succeeded = out.lastIndexOf('SUCCEEDED');
    expect([first, gaveUp, decision, second, succeeded].every((at) => at >= 0), out).toBe(true);
    expect(first).toBeLessThan(decision);
    expect(gaveUp).toBeLessThan(decision);
    expect(decision).toBeLessThan(second);
    expect(second).toBeLessThan(succeeded);
    expect(out).not.toContain('from-the-file');
    const statuses = new Set(out.match(/\b(PENDING|STARTING|RUNNING|RECOVERING|SUCCEEDED)\b/g));
    expect(statuses.size, out).toBeGreaterThan(1);
    // The last line sums the job up.
    expect(out.trimEnd().split('\n').at(-1)).toMatch(/ SUCCEEDED after 2 attempts; recoveries: 1, restarts on errors: /);
    // Where to watch it on the jobs page, while run serves it.
    expect(result.stderr).toMatch(/^jobs page: http:\/\/127\.0\.0\.1:\d+\/#\/jobs\/j-[0-9a-z]+-[0-9a-z]+ \(while this runs\)$/m);
  });

  it.each([
    { what: 'a negative restart budget', json: true, yaml: 'resources:\n  job_recovery:\n    max_restarts_on_errors: -1\nrun: echo hi\n', field: 'resources.job_recovery.max_restarts_on_errors', line: 3 },
    { what: 'an unknown key', json: false, yaml: 'name: typo\nrun: echo hi\nresources:\n  use_spot: true\n  instance_typ: m5.large\n', field: 'resources.instance_typ', line: 5 },
  ])('a task file with $what exits 2, naming the field and its line on stderr, nothing on stdout (json: $json)', async ({ json, yaml, field, line }) => {
    const dir = await tempDir('run');
    const data = join(dir, 'data');
    const task = await writeTask(dir, 'bad.yaml', yaml);
    const result = await runCli(['run', task, '--data-dir', data, ...(json ? ['--json'] : [])], { cwd: dir });
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain(field);
    expect(result.stderr).toContain(`(line ${line})`);
    // Bad input starts nothing: no runtime opened the data folder.
    expect(existsSync(data)).toBe(false);
  });

  it.each([
    ['--env', 'NO_EQUALS_SIGN'],
    ['--preempt-attempts', '0'],
  ])('%s %s is a usage error: exit 2 naming the option, nothing started', async (option, value) => {
    const dir = await tempDir('run');
    const data = join(dir, 'data');
    const result = await runCli(['run', join(EXAMPLES, 'max-restarts.yaml'), '--data-dir', data, option, value], { cwd: dir });
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain(`${option}: expected`);
    expect(result.stderr).toContain(`"${value}"`);
    expect(existsSync(data)).toBe(false);
  });

  it('refuses --env __proto__=x as the env it names, never as a prototype: exit 2, no job', async () => {
    const dir = await tempDir('run');
    const result = await runCli(['run', join(EXAMPLES, 'max-restarts.yaml'), '--data-dir', join(dir, 'data'), '--env', '__proto__=x'], { cwd: dir });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('envs.__proto__');
    expect(result.stdout).toBe('');
  });

  // The same checks in this process (no spawn): the binary only adds process.exitCode.
  it.each([
    ['--env', '1ST=x'],
    ['--env', '=x'],
    ['--env', 'A-B=x'],
    ['--preempt-attempts', '1,,2'],
    ['--preempt-attempts', 'first'],
    ['--preempt-attempts', '-1'],
    ['--preempt-attempts', '1.5'],
  ])('main: %s %s is a usage error (2)', async (option, value) => {
    const dir = await tempDir('run');
    const data = join(dir, 'data');
    const io = bufferIo();
    expect(await main(['node', 'relaunch', 'run', join(EXAMPLES, 'max-restarts.yaml'), '--data-dir', data, `${option}=${value}`], io)).toBe(2);
    expect(io.stdout).toEqual([]);
    expect(io.stderr.join('\n')).toContain(`${option}: expected`);
    expect(existsSync(data)).toBe(false);
  });
});

/** A job that records its shell's pid and a child's, then waits until `$GATE` exists (forever when unset). */
const GATED_JOB = [
  'name: gated',
  'run: |',
  '  echo $$ > "$PIDFILE"',
  '  sleep 60 &',
  '  echo $! > "$PIDFILE.child"',
  '  echo "waiting for the gate"',
  '  while [ ! -f "${GATE:-/nonexistent}" ]; do sleep 0.1; done',
  '  kill $!',
  '  echo "through the gate"',
  '',
].join('\n');

describe.concurrent('relaunch run, stopped by a signal', { timeout: SLOW }, () => {
  it.each([
    { signal: 'SIGINT' as const, json: false, code: 130 },
    { signal: 'SIGTERM' as const, json: true, code: 143 },
  ])('$signal cancels the job it runs: exit $code, CANCELLED, its process group gone (json: $json)', async ({ signal, json, code }) => {
    const dir = await tempDir('signal');
    const data = join(dir, 'data');
    const pidfile = join(dir, 'pid');
    const task = await writeTask(dir, 'gated.yaml', GATED_JOB);
    const cli = startCli(['run', task, '--data-dir', data, '--env', `PIDFILE=${pidfile}`, ...(json ? ['--json'] : [])], { cwd: dir });
    const shell = await waitForPid(pidfile);
    const child = await waitForPid(`${pidfile}.child`);
    const group = processGroupOf(shell);
    expect(group).not.toBe(processGroupOf(cli.child.pid as number));

    cli.child.kill(signal);
    const result = await cli.finished;

    expect(result.code, result.stderr).toBe(code);
    expect(result.stderr).toMatch(/cancelling j-/);
    if (json) {
      expect(parseStdout<JobView>(result)).toMatchObject({ status: 'CANCELLED', attempts: [{ attempt: 1, outcome: 'CANCELLED' }] });
    } else {
      expect(result.stdout).toContain('waiting for the gate');
      expect(result.stdout.trimEnd().split('\n').at(-1)).toMatch(/ CANCELLED after 1 attempt; /);
      // The cancel's lines follow what was printed; the history before them is not printed again.
      const printed = `${result.stdout}${result.stderr}`;
      expect(printed.match(/ RUNNING /g) ?? [], printed).toHaveLength(1);
    }
    expect(isAlive(shell)).toBe(false);
    await waitForGroupGone(group);
    expect(isAlive(child)).toBe(false);
    await waitFor('the background runtime to go once idle', () => (serverInfo(data) === undefined ? true : undefined));
  });
});

// Not concurrent with the runs above: the background server must start within the 15 s
// `run --detach` waits for it, which a machine busy with ten other runs may not give it.
describe('relaunch run --detach', { timeout: SLOW }, () => {
  it('prints only the job id and returns while the job runs; a background server runs it to the end, then exits', async () => {
    const dir = await tempDir('detach');
    const data = join(dir, 'data');
    const gate = join(dir, 'gate');
    const pidfile = join(dir, 'pid');
    const task = await writeTask(dir, 'gated.yaml', GATED_JOB);
    // `relaunch serve` listens on 8080 by default; the background server must not need it.
    const blocker = await holdPort(8080);
    let server = serverInfo(data);
    try {
      const detached = await runCli(['run', task, '--detach', '--data-dir', data, '--env', `GATE=${gate}`, '--env', `PIDFILE=${pidfile}`], { cwd: dir });
      expect(detached.code, detached.stderr).toBe(0);
      expect(detached.stdout).toMatch(/^j-[\w-]+\n$/);
      const jobId = detached.stdout.trim();
      server = serverInfo(data);
      expect(server).toBeDefined();
      const { pid } = server as { pid: number };

      // The job cannot end before the gate opens: the command returned while it runs.
      const early = await runInProcess(['status', jobId, '--json', '--data-dir', data]);
      expect(early.code, early.stderr).toBe(0);
      expect(isTerminal(parseStdout<JobView>(early).status)).toBe(false);
      await waitForPid(pidfile);

      await writeFile(gate, '');
      await waitFor('the background server to remove server.json', () => (serverInfo(data) === undefined ? true : undefined));
      await waitFor('the background server to exit', () => (isAlive(pid) ? undefined : true));

      // Read from the data folder itself now: a job the server had left live would show
      // as FAILED_CONTROLLER here, not SUCCEEDED.
      const done = await runInProcess(['status', jobId, '--json', '--data-dir', data]);
      expect(done.code, done.stderr).toBe(0);
      expect(parseStdout<JobView>(done)).toMatchObject({
        jobId,
        name: 'gated',
        status: 'SUCCEEDED',
        attempts: [{ attempt: 1, outcome: 'EXITED', exitCodes: [0], decision: 'SUCCEED' }],
      });
    } finally {
      stopServer(server);
      blocker?.close();
    }
  });
});

/** Listens on 127.0.0.1:port so nothing else can; null when something already does. */
async function holdPort(port: number): Promise<net.Server | null> {
  const server = net.createServer();
  return new Promise((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) => (error.code === 'EADDRINUSE' ? resolve(null) : reject(error)));
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}
