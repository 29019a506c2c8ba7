// `relaunch simulate`: output, exit status and errors, through runSimulate and the real binary.

import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { CommanderError } from 'commander';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runSimulate, simulateCommand } from '../../../cli/commands/simulate.ts';
import { bufferIo } from '../../support/cli.ts';

const run = promisify(execFile);
const BIN = fileURLToPath(new URL('../../../cli/bin.js', import.meta.url));

const RECOVERING_TASK = `name: train
resources:
  use_spot: true
  job_recovery:
    max_restarts_on_errors: 3
    recover_on_exit_codes: [29]
run: python train.py
`;

const TWO_NODE_TASK = `num_nodes: 2
resources:
  job_recovery:
    recover_on_exit_codes: 29
run: torchrun train.py
`;

let dir: string;
let task: string;
let twoNodes: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'relaunch-simulate-'));
  task = join(dir, 'task.yaml');
  twoNodes = join(dir, 'two-nodes.yaml');
  await writeFile(task, RECOVERING_TASK);
  await writeFile(twoNodes, TWO_NODE_TASK);
  await writeFile(join(dir, 'unknown-key.yaml'), 'run: echo hi\nreboot_on_failure: true\n');
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('runSimulate', () => {
  it('says after each decision what became of the standby a warning started, with launch_on_warning', async () => {
    const warm = join(dir, 'warm.yaml');
    await writeFile(warm, RECOVERING_TASK.replace('max_restarts_on_errors: 3', 'max_restarts_on_errors: 3\n    launch_on_warning: rebalance'));
    const io = bufferIo();
    expect(await runSimulate(warm, ['warn', 'gone:0', 'rebalance', 'exit:1', 'exit:1', 'rebalance', 'exit:0'], {}, io)).toBe(0);
    expect(io.stdout.join('\n').split('\n')).toEqual([
      '1. warn gone:0       → RECOVER  RECOVERING  (spot preemption; recovery 1, does not count toward max_restarts_on_errors) [its standby is the next attempt, setup done]',
      '2. rebalance exit:1  → RESTART  RECOVERING  (exit code 1 (run); restart 1 of 3 on errors, 2 left) [its standby is the next attempt, setup done]',
      '3. exit:1            → RESTART  RECOVERING  (exit code 1 (run); restart 2 of 3 on errors, 1 left)',
      '4. rebalance exit:0  → SUCCEED  SUCCEEDED   (exit code 0 (run); job succeeded) [its standby is released, charged to nothing]',
      'final: SUCCEEDED',
    ]);
    const json = bufferIo();
    await runSimulate(warm, ['warn', 'exit:0'], { json: true }, json);
    expect(JSON.parse(json.stdout.join('\n')).decisions[0]).toMatchObject({ event: 'warn exit:0', action: 'SUCCEED', standby: 'released' });
  });

  it('says after each relaunch which nodes it runs on, for a task that reuses them', async () => {
    const four = join(dir, 'four-failover.yaml');
    await writeFile(four, 'num_nodes: 4\nresources:\n  use_spot: true\n  job_recovery:\n    strategy: FAILOVER\n    recover_on_exit_codes: [29]\n    bad_node_exit_codes: [42]\n    reuse_nodes: {setup: skip}\nrun: x\n');
    const io = bufferIo();
    expect(await runSimulate(four, ['preempt@2', 'exit:29+0+0+0', 'exit:42+29+0+0', 'preempt', 'exit:0+0+0+0'], {}, io)).toBe(0);
    expect(io.stderr).toEqual([]);
    expect(io.stdout.join('\n').split('\n')).toEqual([
      '1. preempt@2       → RECOVER  RECOVERING  (spot preemption; recovery 1, does not count toward max_restarts_on_errors) [keeps nodes 0, 1, 3 and replaces node 2 (preempted), setup skipped]',
      '2. exit:29+0+0+0   → RESTART  RECOVERING  (exit code 29 on node 0 (run) is in recover_on_exit_codes; restart 1, unlimited) [in place on nodes 0-3, setup skipped]',
      '3. exit:42+29+0+0  → RESTART  RECOVERING  (exit code 29 on node 1 (run) is in recover_on_exit_codes; restart 2, unlimited) [keeps nodes 1, 2, 3 and replaces node 0 (exited 42, a bad_node_exit_codes code), setup skipped]',
      '4. preempt         → RECOVER  RECOVERING  (spot preemption; recovery 4, does not count toward max_restarts_on_errors) [fresh nodes: which node went is not known]',
      '5. exit:0+0+0+0    → SUCCEED  SUCCEEDED   (all 4 nodes exited 0 (run); job succeeded)',
      'final: SUCCEEDED',
    ]);
    const json = bufferIo();
    expect(await runSimulate(four, ['preempt@2', 'exit:0+0+0+0'], { json: true }, json)).toBe(0);
    expect(JSON.parse(json.stdout.join('\n')).decisions).toEqual([
      {
        event: 'preempt@2',
        action: 'RECOVER',
        status: 'RECOVERING',
        restartsOnErrors: 0,
        recoveryCount: 1,
        reason: 'spot preemption; recovery 1, does not count toward max_restarts_on_errors',
        nodes: { kept: [0, 1, 3], launched: [2], setup: 'skip', reason: 'keeps nodes 0, 1, 3 and replaces node 2 (preempted), setup skipped' },
      },
      { event: 'exit:0+0+0+0', action: 'SUCCEED', status: 'SUCCEEDED', restartsOnErrors: 0, recoveryCount: 1, reason: 'all 4 nodes exited 0 (run); job succeeded' },
    ]);
  });

  it('prints one aligned line per event and the final status, and returns 0', async () => {
    const io = bufferIo();
    const status = await runSimulate(task, ['exit:29', 'preempt', 'exit:1', 'exit:0'], {}, io);
    expect(status).toBe(0);
    expect(io.stderr).toEqual([]);
    expect(io.stdout.join('\n').split('\n')).toEqual([
      '1. exit:29  → RESTART  RECOVERING  (exit code 29 (run) is in recover_on_exit_codes; restart 1, unlimited)',
      '2. preempt  → RECOVER  RECOVERING  (spot preemption; recovery 2, does not count toward max_restarts_on_errors)',
      '3. exit:1   → RESTART  RECOVERING  (exit code 1 (run); restart 1 of 3 on errors, 2 left)',
      '4. exit:0   → SUCCEED  SUCCEEDED   (exit code 0 (run); job succeeded)',
      'final: SUCCEEDED',
    ]);
  });

  it('returns 0 when the simulated job fails: the command itself ran', async () => {
    const io = bufferIo();
    const status = await runSimulate(task, ['exit:1', 'exit:1', 'exit:1', 'exit:1'], {}, io);
    expect(status).toBe(0);
    expect(io.stdout.join('\n')).toMatch(/4\. exit:1 +→ FAIL +FAILED +\(exit code 1 \(run\); max_restarts_on_errors \(3\) used up\)\nfinal: FAILED$/);
  });

  it('--json prints exactly {decisions, final}', async () => {
    const io = bufferIo();
    const status = await runSimulate(twoNodes, ['exit:0+29', 'exit:0+0'], { json: true }, io);
    expect(status).toBe(0);
    expect(JSON.parse(io.stdout.join(''))).toEqual({
      decisions: [
        {
          event: 'exit:0+29',
          action: 'RESTART',
          status: 'RECOVERING',
          restartsOnErrors: 0,
          recoveryCount: 1,
          reason: 'exit code 29 on node 1 (run) is in recover_on_exit_codes; restart 1, unlimited',
        },
        {
          event: 'exit:0+0',
          action: 'SUCCEED',
          status: 'SUCCEEDED',
          restartsOnErrors: 0,
          recoveryCount: 1,
          reason: 'all 2 nodes exited 0 (run); job succeeded',
        },
      ],
      final: { status: 'SUCCEEDED' },
    });
  });

  it.each([
    ['a bad event', () => task, ['exit:1', 'boom'], /^error: event 2: expected exit:N, .* got "boom"$/],
    ['one code for two nodes', () => twoNodes, ['exit:1'], /^error: event 1: "exit:1" has 1 exit code, but the task has 2 nodes/],
    ['an event after the job ended', () => task, ['exit:0', 'preempt'], /^error: event 2: "preempt" comes after the job ended with SUCCEEDED at event 1/],
    ['a missing file', () => join(dir, 'nope.yaml'), ['exit:0'], /^error: .*nope\.yaml: no such file$/],
    ['a directory', () => dir, ['exit:0'], /^error: .*: is a directory, expected a task file$/],
    ['a task file with an unknown key', () => join(dir, 'unknown-key.yaml'), ['exit:0'], /^error: .*reboot_on_failure/],
  ] as [string, () => string, string[], RegExp][])('%s is bad input: status 2, message on stderr, nothing on stdout', async (_name, file, events, message) => {
    const io = bufferIo();
    const status = await runSimulate(file(), events, { json: true }, io);
    expect(status).toBe(2);
    expect(io.stdout).toEqual([]);
    expect(io.stderr.join('\n')).toMatch(message);
  });
});

describe('runSimulate: the events of a messy end', () => {
  it('warn exit:0+1 is a preemption, gone:N a lost instance, nocap on a relaunch a wait', async () => {
    const io = bufferIo();
    expect(await runSimulate(twoNodes, ['warn', 'exit:0+1', 'gone:1', 'nocap', 'exit:0+0'], {}, io)).toBe(0);
    expect(io.stderr).toEqual([]);
    expect(io.stdout.join('\n').split('\n')).toEqual([
      '1. warn exit:0+1  → RECOVER  RECOVERING  (spot preemption; recovery 1, does not count toward max_restarts_on_errors)',
      '2. gone:1         → RECOVER  RECOVERING  (instance lost (instance of node 1 was terminated); recovery 2, does not count toward max_restarts_on_errors)',
      '3. nocap          → RECOVER  RECOVERING  (waiting for capacity: InsufficientInstanceCapacity in every zone tried; next try in 60 s)',
      '4. exit:0+0       → SUCCEED  SUCCEEDED   (all 2 nodes exited 0 (run); job succeeded)',
      'final: SUCCEEDED',
    ]);
  });

  it('--json keeps its shape: a warn is shown with the event it precedes', async () => {
    const io = bufferIo();
    expect(await runSimulate(twoNodes, ['warn', 'exit:0+1', 'nocap', 'noboot', 'exit:0+0'], { json: true }, io)).toBe(0);
    const result = JSON.parse(io.stdout.join('')) as { decisions: Record<string, unknown>[]; final: unknown };
    expect(result.decisions.map((d) => Object.keys(d))).toEqual(Array(4).fill(['event', 'action', 'status', 'restartsOnErrors', 'recoveryCount', 'reason']));
    expect(result.decisions.map((d) => [d.event, d.action, d.status])).toEqual([
      ['warn exit:0+1', 'RECOVER', 'RECOVERING'],
      ['nocap', 'RECOVER', 'RECOVERING'],
      ['noboot', 'RECOVER', 'RECOVERING'],
      ['exit:0+0', 'SUCCEED', 'SUCCEEDED'],
    ]);
    expect(result.final).toEqual({ status: 'SUCCEEDED' });
  });

  it('nocap at the first launch ends the job FAILED_NO_RESOURCE, and the command still exits 0', async () => {
    const io = bufferIo();
    expect(await runSimulate(task, ['nocap'], {}, io)).toBe(0);
    expect(io.stdout.join('\n')).toBe(
      '1. nocap  → FAIL  FAILED_NO_RESOURCE  (no capacity: InsufficientInstanceCapacity in every zone tried)\nfinal: FAILED_NO_RESOURCE',
    );
  });

  it.each([
    ['a warn with nothing after it', ['exit:1+0', 'warn'], /^error: event 2: "warn" ends nothing by itself/],
    ['a warn before nocap', ['preempt', 'warn', 'nocap'], /^error: event 3: "nocap" follows a warn/],
    ['a node the task does not have', ['gone:5'], /^error: event 1: "gone:5": node 5 is not one of the task's 2 nodes \(ranks 0 to 1\)$/],
  ] as [string, string[], RegExp][])('%s is bad input: status 2', async (_name, events, message) => {
    const io = bufferIo();
    expect(await runSimulate(twoNodes, events, {}, io)).toBe(2);
    expect(io.stdout).toEqual([]);
    expect(io.stderr.join('\n')).toMatch(message);
  });
});

describe('simulateCommand', () => {
  it('parses the task, the events and --json', async () => {
    const io = bufferIo();
    await simulateCommand(io).parseAsync([task, 'exit:29', 'exit:0', '--json'], { from: 'user' });
    expect(JSON.parse(io.stdout.join('')).final).toEqual({ status: 'SUCCEEDED' });
  });

  it('leaves a non-zero status as a CommanderError carrying it', async () => {
    const io = bufferIo();
    const parsing = simulateCommand(io).parseAsync([task, 'nonsense'], { from: 'user' });
    await expect(parsing).rejects.toBeInstanceOf(CommanderError);
    await expect(parsing).rejects.toMatchObject({ exitCode: 2, code: 'relaunch.exitStatus' });
  });

  it('--help names every event and what it means', async () => {
    const io = bufferIo();
    const command = simulateCommand(io);
    let help = '';
    command.configureOutput({ writeOut: (text) => (help += text) });
    await expect(command.parseAsync(['--help'], { from: 'user' })).rejects.toMatchObject({ code: 'commander.helpDisplayed' });
    for (const event of ['exit:N', 'setup:N', 'preempt', 'lost', 'warn', 'gone:N', 'nocap', 'noboot']) expect(help).toContain(`  ${event}`);
    expect(help).toContain('PREEMPTED unless every node exits 0 (warn exit:0+1)');
    expect(help).toContain('relaunch simulate two-nodes.yaml warn exit:0+1 gone:1 exit:0+0');
  });

  it('a missing event is a usage error, not a process exit', async () => {
    const io = bufferIo();
    await expect(simulateCommand(io).parseAsync([task], { from: 'user' })).rejects.toMatchObject({
      code: 'commander.missingArgument',
    });
    expect(io.stderr.join('')).toMatch(/missing required argument 'events'/);
  });
});

describe('the relaunch binary', () => {
  it('simulate --json prints exactly the documented shape and exits 0', async () => {
    const { stdout } = await run('node', [BIN, 'simulate', task, 'preempt', 'exit:1', 'exit:0', '--json']);
    expect(JSON.parse(stdout)).toEqual({
      decisions: [
        {
          event: 'preempt',
          action: 'RECOVER',
          status: 'RECOVERING',
          restartsOnErrors: 0,
          recoveryCount: 1,
          reason: 'spot preemption; recovery 1, does not count toward max_restarts_on_errors',
        },
        {
          event: 'exit:1',
          action: 'RESTART',
          status: 'RECOVERING',
          restartsOnErrors: 1,
          recoveryCount: 2,
          reason: 'exit code 1 (run); restart 1 of 3 on errors, 2 left',
        },
        {
          event: 'exit:0',
          action: 'SUCCEED',
          status: 'SUCCEEDED',
          restartsOnErrors: 1,
          recoveryCount: 2,
          reason: 'exit code 0 (run); job succeeded',
        },
      ],
      final: { status: 'SUCCEEDED' },
    });
  });

  it('simulate TASK warn exit:0+1 prints a preemption, not the failure the codes alone make', async () => {
    const warned = await run('node', [BIN, 'simulate', twoNodes, 'warn', 'exit:0+1']);
    expect(warned.stdout).toBe(
      '1. warn exit:0+1  → RECOVER  RECOVERING  (spot preemption; recovery 1, does not count toward max_restarts_on_errors)\nfinal: RECOVERING\n',
    );
    const unwarned = await run('node', [BIN, 'simulate', twoNodes, 'exit:0+1']);
    expect(unwarned.stdout).toMatch(/^1\. exit:0\+1 +→ FAIL +FAILED /);
  });

  it('exits 2 with the message on stderr for a bad event', async () => {
    const failure = await run('node', [BIN, 'simulate', task, 'exit:0', 'exit:0']).then(
      () => null,
      (error: { code: number; stdout: string; stderr: string }) => error,
    );
    expect(failure).toMatchObject({ code: 2, stdout: '' });
    expect(failure?.stderr).toMatch(/^error: event 2: "exit:0" comes after the job ended with SUCCEEDED at event 1/);
  });
});
