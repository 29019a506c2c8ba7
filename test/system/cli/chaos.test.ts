// `--chaos FILE` on `relaunch run` and `relaunch serve`, through the real binary: a bad
// chaos file, or one naming a node the task lacks, ends the command with exit 2, the path
// and the line on stderr, and nothing opened or submitted; an API refuses chaos.

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { main } from '../../../cli/main.ts';
import { bufferIo, EXAMPLES, killStrayClis, removeTempDirs, runCli, SLOW, tempDir, writeTask } from '../../support/cli.ts';

afterAll(async () => {
  killStrayClis();
  await removeTempDirs();
});

const TASK = join(EXAMPLES, 'max-restarts.yaml');

const BAD_DURATION = ['faults:', '  - attempt: 1', '    preempt:', '      after: 2', ''].join('\n');
const BAD_DURATION_ERROR = 'error: faults[0].preempt.after: expected a duration such as 500ms, 2s, 1m or 1h, got 2: add a unit, such as 2s or 2ms (line 4)';

describe.concurrent('--chaos with a bad file', { timeout: SLOW }, () => {
  it('relaunch run: exit 2 with the path and line, nothing submitted', async () => {
    const dir = await tempDir('chaos');
    const data = join(dir, 'data');
    const chaos = await writeTask(dir, 'chaos.yaml', BAD_DURATION);
    const result = await runCli(['run', TASK, '--data-dir', data, '--chaos', chaos], { cwd: dir });
    expect(result.code, result.stderr).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr.trimEnd().split('\n')).toEqual([BAD_DURATION_ERROR]);
    // No runtime opened the data folder, so no job can have been submitted.
    expect(existsSync(data)).toBe(false);
  });

  it('relaunch run: a node the task lacks is exit 2 with the fault path and the line of its node', async () => {
    const dir = await tempDir('chaos');
    const data = join(dir, 'data');
    const chaos = await writeTask(dir, 'chaos.yaml', ['faults:', '  - attempt: 1', '    drop_events: true', '  - attempt: 2', '    lose: {node: 1, after: 1s}', ''].join('\n'));
    const result = await runCli(['run', TASK, '--data-dir', data, '--chaos', chaos, '--preempt-attempts', '1'], { cwd: dir });
    expect(result.code, result.stderr).toBe(2);
    expect(result.stderr.trimEnd().split('\n')).toEqual(['error: faults[1].lose.node: expected node 0 (the task has 1 node), got 1 (line 5)']);
    expect(existsSync(data)).toBe(false);
  });

  it('relaunch serve: exit 2 with the path and line, no runtime started', async () => {
    const dir = await tempDir('chaos');
    const data = join(dir, 'data');
    const chaos = await writeTask(dir, 'chaos.yaml', BAD_DURATION);
    const result = await runCli(['serve', '--port', '0', '--data-dir', data, '--chaos', chaos], { cwd: dir });
    expect(result.code, result.stderr).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr.trimEnd().split('\n')).toEqual([BAD_DURATION_ERROR]);
    expect(existsSync(data)).toBe(false);
  });
});

describe('--boot through the real binary', { timeout: SLOW }, () => {
  it("reaches the background runtime: the job's node runs from its boot's end, and the job as usual", async () => {
    const dir = await tempDir('chaos');
    const data = join(dir, 'data');
    const task = await writeTask(dir, 'task.yaml', 'run: echo booted\n');
    const result = await runCli(['run', task, '--data-dir', data, '--boot', '2s', '--json'], { cwd: dir });
    expect(result.code, result.stderr).toBe(0);
    const view = JSON.parse(result.stdout) as { status: string; account: { attempts: { launchRequestedAt: string; nodes: { runningAt: string }[] }[] } };
    expect(view.status).toBe('SUCCEEDED');
    const [attempt] = view.account.attempts;
    expect(Date.parse(attempt?.nodes[0]?.runningAt ?? '')).toBeGreaterThanOrEqual(Date.parse(attempt?.launchRequestedAt ?? '') + 2_000);
  });
});

// The same paths in this process (no spawn), for the other ways a chaos file is refused.
describe('--chaos, refused in this process', () => {
  it('names a missing chaos file', async () => {
    const dir = await tempDir('chaos');
    const data = join(dir, 'data');
    const missing = join(dir, 'missing.yaml');
    const io = bufferIo();
    expect(await main(['node', 'relaunch', 'run', TASK, '--data-dir', data, '--chaos', missing], io)).toBe(2);
    expect(io.stderr).toEqual([`error: ${missing}: no such file`]);
    expect(existsSync(data)).toBe(false);
  });

  it('reports every problem of the file, each with its line', async () => {
    const dir = await tempDir('chaos');
    const data = join(dir, 'data');
    const chaos = await writeTask(dir, 'chaos.yaml', ['faults:', '  - attempt: 0', '    no_capacity: 1', '  - attempt: 2', '    preemt: {}', ''].join('\n'));
    const io = bufferIo();
    expect(await main(['node', 'relaunch', 'run', TASK, '--data-dir', data, '--chaos', chaos], io)).toBe(2);
    expect(io.stderr).toEqual([
      'error: faults[0].attempt: expected an attempt number, an integer from 1 to 1000, got 0 (line 2)\n' +
        'error: faults[1].preemt: unknown key, did you mean `preempt`? (line 5)',
    ]);
    expect(existsSync(data)).toBe(false);
  });

  it.each([
    ['--chaos', ['--chaos', 'chaos.yaml']],
    ['--preempt-attempts', ['--preempt-attempts', '1']],
    ['--boot', ['--boot', '30s']],
    ['a chaos file with only a boot', ['--chaos', 'boot.yaml']],
  ])('%s is refused for a job submitted through an API, before any request', async (_option, args) => {
    const dir = await tempDir('chaos');
    await writeTask(dir, 'chaos.yaml', 'faults: [{attempt: 1, drop_events: true}]\n');
    await writeTask(dir, 'boot.yaml', 'boot: 20s\n');
    const io = bufferIo();
    // Port 9 (discard): nothing listens, so a request made anyway would fail differently.
    const argv = ['node', 'relaunch', 'run', TASK, '--api', 'http://127.0.0.1:9', ...args.map((arg) => (arg.endsWith('.yaml') ? join(dir, arg) : arg))];
    expect(await main(argv, io)).toBe(2);
    expect(io.stderr).toEqual([
      'error: --chaos: chaos (--chaos, --preempt-attempts, --boot) applies only to a runtime in this process or one given it by `relaunch serve --chaos`, not to a job submitted through an API',
    ]);
  });

  it.each([
    ['30', 'expected a duration such as 500ms, 2s, 1m or 1h, got "30": add a unit, such as 30s or 30ms'],
    ['soon', 'expected a duration such as 500ms, 2s, 1m or 1h, got "soon"'],
    ['2d', 'expected a duration such as 500ms, 2s, 1m or 1h, got "2d"'],
  ])('--boot %s is exit 2 naming --boot, nothing opened', async (value, message) => {
    const dir = await tempDir('chaos');
    const data = join(dir, 'data');
    const io = bufferIo();
    expect(await main(['node', 'relaunch', 'run', TASK, '--data-dir', data, '--boot', value], io)).toBe(2);
    expect(io.stderr).toEqual([`error: --boot: ${message}`]);
    expect(existsSync(data)).toBe(false);
  });

  it('an empty chaos file through an API is no chaos: it goes on to the request', async () => {
    const dir = await tempDir('chaos');
    const chaos = await writeTask(dir, 'chaos.yaml', 'faults: []\n');
    const io = bufferIo();
    expect(await main(['node', 'relaunch', 'run', TASK, '--api', 'http://127.0.0.1:9', '--chaos', chaos], io)).toBe(2);
    expect(io.stderr).toEqual([expect.stringMatching(/^error: cannot reach http:\/\/127\.0\.0\.1:9: .*\n {2}fix: check the URL /)]);
  });
});
