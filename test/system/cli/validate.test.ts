// `relaunch validate`: the summary, --json, warnings, every error, exit statuses, and the real binary.

import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { CommanderError } from 'commander';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { codeRuns, runValidate, validateCommand } from '../../../cli/commands/validate.ts';
import { bufferIo } from '../../support/cli.ts';

const run = promisify(execFile);
const BIN = fileURLToPath(new URL('../../../cli/bin.js', import.meta.url));
const VALID = fileURLToPath(new URL('../../support/fixtures/tasks/valid/', import.meta.url));
const INVALID = fileURLToPath(new URL('../../support/fixtures/tasks/invalid/', import.meta.url));

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'relaunch-validate-'));
  await mkdir(join(dir, 'a-directory.yaml'));
  await writeFile(join(dir, 'unreadable.yaml'), 'run: x\n', { mode: 0o000 });
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('runValidate, human output', () => {
  it('prints a summary of the normalized task on stdout and returns 0', async () => {
    const io = bufferIo();
    const file = `${VALID}multinode-torchrun-checkpoints.yaml`;
    expect(await runValidate(file, {}, io)).toBe(0);
    expect(io.stderr).toEqual([]);
    expect(io.stdout.join('\n').split('\n')).toEqual([
      `${file}: a valid task`,
      '  name          llama-pretrain-7b',
      '  nodes         4',
      '  cloud         aws, any region, spot',
      '  machine       disk 1024 GB',
      '  accelerators  any one of H100:8, A100-80GB:8',
      '  image         default',
      '  recovery      FAILOVER, max_restarts_on_errors 3',
      '                recover_on_exit_codes 29, 64-78 (unlimited)',
      '                restart_backoff 30 s x2 up to 600 s, full jitter',
      "                relaunches on the healthy nodes, replacing only lost or bad ones, setup run again (the FAILOVER strategy's default)",
      '  workdir       .',
      '  mounts        (none)',
      '  envs          CHECKPOINT_DIR, GLOBAL_BATCH, RESUME',
      '  secrets       (none)',
      '  setup         1 line',
      '  run           7 lines',
      // The candidates' price per instance-hour, from the package's table, which has no P4de or P5 price.
      '  price/hour    p5.48xlarge: not in the price table',
      '                p4de.24xlarge: not in the price table',
    ]);
  });

  it('shows ordered entries, ports and the network tier', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'relaunch-validate-'));
    const file = join(dir, 'ordered.yaml');
    writeFileSync(file, 'resources:\n  ordered:\n    - {region: us-east-2, accelerators: L4:1}\n    - {instance_type: g5.xlarge, use_spot: true}\n  ports: [8081, "9000-9010"]\n  network_tier: best\nrun: x\n');
    const io = bufferIo();

    expect(await runValidate(file, {}, io)).toBe(0);

    expect(io.stdout.join('\n')).toContain(
      [
        '  cloud         aws, any region, market per entry',
        '  machine       any',
        '  accelerators  none',
        '  ordered       1. us-east-2, L4:1, on-demand',
        '                2. g5.xlarge, spot',
        '  ports         8081, 9000-9010',
        '  network       best (EFA on instance types that have it)',
      ].join('\n'),
    );
    rmSync(dir, { recursive: true, force: true });
  });

  it('shows every part a task can set', async () => {
    const io = bufferIo();
    const file = `${VALID}spot-recover-exit-codes.yaml`;
    expect(await runValidate(file, {}, io)).toBe(0);
    expect(io.stdout.join('\n')).toContain(
      [
        '  cloud         aws, us-east-1, spot',
        '  machine       any',
        '  accelerators  A10G:1',
        '  image         default',
        '  recovery      EAGER_NEXT_REGION, max_restarts_on_errors 1',
        '                recover_on_exit_codes 75 (at most 10 restarts)',
        '                fail_on_exit_codes 2-3',
        '                restart_backoff 15 s x3 up to 300 s, none jitter',
        '                on-demand after 3 preemptions in a row',
        "                relaunches on fresh nodes (the EAGER_NEXT_REGION strategy's default)",
        '  workdir       (none)',
        '  mounts        (none)',
        '  envs          (none)',
      ].join('\n'),
    );
  });

  it.each([
    ['cpu-etl-pinned-zone.yaml', ['  cloud         aws, us-east-1, zone us-east-1b, on-demand', '  machine       m7i.4xlarge, disk 256 GB', '  image         ami-0a1b2c3d4e5f60718']],
    ['per-region-ami.yaml', ['  image         us-east-1 ami-0123456789abcdef0, us-west-2 ami-0fedcba9876543210']],
    ['batch-inference-shards.yaml', ['  machine       cpus 8+, memory 32+ GB', '  setup         (none)']],
    ['provision-only.yaml', ['  accelerators  none', '  run           (none)']],
    ['minimal-run.yaml', ['  name          (none)']],
  ])('summarizes %s', async (file, rows) => {
    const io = bufferIo();
    expect(await runValidate(`${VALID}${file}`, {}, io)).toBe(0);
    for (const row of rows) expect(io.stdout.join('\n').split('\n')).toContain(row);
  });

  it('writes warnings to stderr and still returns 0', async () => {
    const io = bufferIo();
    expect(await runValidate(`${VALID}legacy-spot-recovery.yaml`, {}, io)).toBe(0);
    expect(io.stderr).toEqual([
      'warning: resources.spot_recovery: a legacy name: SkyPilot renamed it job_recovery and removed spot_recovery in February 2025; relaunch still reads it as job_recovery (line 8)',
    ]);
  });

  it.each([
    ['runaway-bounds.yaml', [
      '  recovery      FAILOVER, max_restarts_on_errors 0',
      '                recover_on_exit_codes 75 (at most 5 restarts)',
      '                max_recoveries 20',
      "                relaunches on the healthy nodes, replacing only lost or bad ones, setup run again (the FAILOVER strategy's default)",
      '                launch_timeout 6h',
      '                boot_timeout 20m',
      '                max_boot_failures 5',
      '  workdir       (none)',
    ]],
    ['boundary-bounds.yaml', [
      '  recovery      EAGER_NEXT_REGION, max_restarts_on_errors 0',
      '                restart_backoff 604800 s x2 up to 604800 s, full jitter',
      '                max_recoveries 0',
      "                relaunches on fresh nodes (the EAGER_NEXT_REGION strategy's default)",
      '                launch_timeout 0s',
      '                boot_timeout 1d',
      '                max_boot_failures 1',
      '  workdir       (none)',
    ]],
    ['warm-standby.yaml', [
      '  recovery      EAGER_NEXT_REGION, max_restarts_on_errors 2',
      '                launch_on_warning: the next attempt starts, as a standby, on a rebalance recommendation or a spot interruption warning',
      "                relaunches on fresh nodes (the EAGER_NEXT_REGION strategy's default)",
      '  workdir       (none)',
    ]],
  ])('summarizes the runaway bounds of %s, defaults left out', async (file, rows) => {
    const io = bufferIo();
    expect(await runValidate(`${VALID}${file}`, {}, io)).toBe(0);
    expect(io.stdout.join('\n')).toContain(rows.join('\n'));
  });

  it.each([
    ['max_boot_failures 2, which differs from the default', 'max_boot_failures: 2', ['                max_boot_failures 2']],
    ['nothing for max_boot_failures at its default, 3', 'max_boot_failures: 3', []],
  ])('summarizes %s', async (_name, line, rows) => {
    const file = join(dir, 'boot.yaml');
    await writeFile(file, `resources:\n  job_recovery:\n    ${line}\nrun: x\n`);
    const io = bufferIo();
    expect(await runValidate(file, {}, io)).toBe(0);
    const lines = io.stdout.join('\n').split('\n');
    expect(lines.filter((row) => row.includes('max_boot_failures'))).toEqual(rows);
  });

  it.each([
    ['boot_timeout 15m, which differs from the default', 'boot_timeout: 15m', ['                boot_timeout 15m']],
    ['nothing for boot_timeout at its default, 10m', 'boot_timeout: 600s', []],
  ])('summarizes %s', async (_name, line, rows) => {
    const file = join(dir, 'boot-timeout.yaml');
    await writeFile(file, `resources:\n  job_recovery:\n    ${line}\nrun: x\n`);
    const io = bufferIo();
    expect(await runValidate(file, {}, io)).toBe(0);
    expect(io.stdout.join('\n').split('\n').filter((row) => row.includes('boot_timeout'))).toEqual(rows);
  });

  it.each([
    ['reuse_nodes {setup: skip} under the default strategy', 'reuse_nodes:\n      setup: skip\n    bad_node_exit_codes: [42, "64-66"]', [
      '                relaunches on the healthy nodes, replacing only lost or bad ones, setup skipped where it ran (reuse_nodes)',
      '                bad_node_exit_codes 42, 64-66 (the node that exits one is replaced, the others kept)',
    ], []],
    ['reuse_nodes false under FAILOVER', 'strategy: FAILOVER\n    reuse_nodes: false', ['                relaunches on fresh nodes (reuse_nodes)'], []],
    ['bad_node_exit_codes where relaunches keep no node', 'bad_node_exit_codes: 42', [
      "                relaunches on fresh nodes (the EAGER_NEXT_REGION strategy's default)",
      '                bad_node_exit_codes 42 (no effect: relaunches use fresh nodes)',
    ], [
      "warning: resources.job_recovery.bad_node_exit_codes: has no effect: under the EAGER_NEXT_REGION strategy every relaunch runs on fresh nodes; set reuse_nodes: true (or strategy: FAILOVER) to keep the healthy ones and replace only a bad one (line 3)",
    ]],
  ])('shows which nodes a relaunch runs on: %s', async (_name, keys, rows, warnings) => {
    const file = join(dir, 'reuse.yaml');
    await writeFile(file, `resources:\n  job_recovery:\n    ${keys}\nrun: x\n`);
    const io = bufferIo();
    expect(await runValidate(file, {}, io)).toBe(0);
    const lines = io.stdout.join('\n').split('\n');
    expect(lines.filter((row) => row.includes('relaunches on') || row.includes('bad_node_exit_codes'))).toEqual(rows);
    expect(io.stderr).toEqual(warnings);
  });

  it('refuses a misspelt reuse_nodes setup and a bad-node 0, naming each field, and returns 2', async () => {
    const file = join(dir, 'reuse-bad.yaml');
    await writeFile(file, 'resources:\n  job_recovery:\n    reuse_nodes: {stup: skip}\n    bad_node_exit_codes: [0, 42]\nrun: x\n');
    const io = bufferIo();
    expect(await runValidate(file, {}, io)).toBe(2);
    expect(io.stdout).toEqual([]);
    expect(io.stderr.join('\n').split('\n')).toEqual([
      'error: resources.job_recovery.reuse_nodes.stup: unknown key: a reuse_nodes mapping takes only setup (skip or rerun) (line 3)',
      'error: resources.job_recovery.bad_node_exit_codes: expected non-zero codes (0 is success: a node that exits 0 is never the bad one), got 0 (line 4)',
    ]);
  });

  it('refuses a boot_timeout of 0s with the bounds it takes, and returns 2', async () => {
    const file = join(dir, 'boot-timeout-zero.yaml');
    await writeFile(file, 'resources:\n  job_recovery:\n    boot_timeout: 0s\n    max_boot_failures: 5\nrun: x\n');
    const io = bufferIo();
    expect(await runValidate(file, {}, io)).toBe(2);
    expect(io.stdout).toEqual([]);
    expect(io.stderr).toEqual([
      'error: resources.job_recovery.boot_timeout: expected a duration from 1s to 1d such as 10m or 90s, got "0s" (line 3)',
    ]);
  });

  it('warns, as a review, about codes that relaunch without a cap or a pause, and says what to add', async () => {
    const file = join(dir, 'unbounded.yaml');
    await writeFile(file, 'resources:\n  job_recovery:\n    recover_on_exit_codes: [29]\nrun: x\n');
    const io = bufferIo();
    expect(await runValidate(file, {}, io)).toBe(0);
    expect(io.stderr).toEqual([
      'warning: resources.job_recovery.recover_on_exit_codes: no cap and no pause: a listed code that comes back on every attempt relaunches the job forever, each time at once; ' +
        'add max_restarts_on_exit_codes (a cap, past which the code is an ordinary failure) or restart_backoff (a wait between relaunches) (line 3)',
    ]);
    const json = bufferIo();
    expect(await runValidate(file, { json: true }, json)).toBe(0);
    expect(JSON.parse(json.stdout.join('')).warnings).toEqual([
      expect.objectContaining({ path: 'resources.job_recovery.recover_on_exit_codes', line: 3, message: expect.stringMatching(/^no cap and no pause/) }),
    ]);
  });

  it('warns that SkyPilot would drop a job_recovery mapping whose strategy is none', async () => {
    const io = bufferIo();
    expect(await runValidate(`${VALID}strategy-none-with-keys.yaml`, {}, io)).toBe(0);
    expect(io.stderr).toEqual([
      'warning: resources.job_recovery.strategy: none beside other keys (max_restarts_on_errors): relaunch applies those with the default strategy, ' +
        'but SkyPilot ignores the whole job_recovery mapping when strategy is none; leave strategy out to mean the same in both (line 5)',
    ]);
    expect(io.stdout.join('\n')).toContain('  recovery      EAGER_NEXT_REGION, max_restarts_on_errors 2');
  });

  it('writes every problem to stderr, nothing to stdout, and returns 2', async () => {
    const io = bufferIo();
    const file = `${INVALID}everything-wrong-at-once.yaml`;
    expect(await runValidate(file, {}, io)).toBe(2);
    const expected = readFileSync(file.replace(/\.yaml$/, '.expected'), 'utf8').trimEnd().split('\n');
    expect(io.stdout).toEqual([]);
    expect(io.stderr.join('\n').split('\n')).toEqual(expected.map((line) => `error: ${line}`));
  });

  it.each([
    ['a missing file', 'missing.yaml', 'no such file'],
    ['a directory', 'a-directory.yaml', 'is a directory, expected a task file'],
  ])('names %s and returns 2', async (_name, file, message) => {
    const io = bufferIo();
    expect(await runValidate(join(dir, file), {}, io)).toBe(2);
    expect(io.stderr).toEqual([`error: ${join(dir, file)}: ${message}`]);
  });

  it.skipIf(process.getuid?.() === 0)('names a file it may not read and returns 2', async () => {
    const io = bufferIo();
    expect(await runValidate(join(dir, 'unreadable.yaml'), {}, io)).toBe(2);
    expect(io.stderr).toEqual([`error: ${join(dir, 'unreadable.yaml')}: permission denied: relaunch may not read it`]);
  });
});

describe('runValidate --json', () => {
  it('prints {ok: true, spec, warnings} on stdout, nothing on stderr, and returns 0', async () => {
    const io = bufferIo();
    const file = `${VALID}risky-exit-codes.yaml`;
    expect(await runValidate(file, { json: true }, io)).toBe(0);
    const expected = JSON.parse(readFileSync(file.replace(/\.yaml$/, '.json'), 'utf8')) as object;
    expect(io.stderr).toEqual([]);
    expect(JSON.parse(io.stdout.join(''))).toEqual({
      ok: true,
      ...expected,
      candidates: expect.any(Array),
      relaunchNodes: { reuse: false, setup: 'rerun', source: 'strategy', summary: "relaunches on fresh nodes (the EAGER_NEXT_REGION strategy's default)" },
    });
  });

  it('prints the effective reuse choice as relaunchNodes, per task in a pipeline', async () => {
    const file = join(dir, 'reuse-pipeline.yaml');
    await writeFile(file, 'name: two\n---\nresources:\n  job_recovery: FAILOVER\nrun: x\n---\nresources:\n  job_recovery:\n    reuse_nodes: {setup: skip}\nrun: y\n');
    const io = bufferIo();
    expect(await runValidate(file, { json: true }, io)).toBe(0);
    const body = JSON.parse(io.stdout.join('')) as { relaunchNodes: unknown };
    expect(body.relaunchNodes).toEqual([
      { reuse: true, setup: 'rerun', source: 'strategy', summary: "relaunches on the healthy nodes, replacing only lost or bad ones, setup run again (the FAILOVER strategy's default)" },
      { reuse: true, setup: 'skip', source: 'reuse_nodes', summary: 'relaunches on the healthy nodes, replacing only lost or bad ones, setup skipped where it ran (reuse_nodes)' },
    ]);
  });

  it('lists the instance types a task may launch on, with vCPUs, memory, GPUs and market', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'relaunch-validate-'));
    const file = join(dir, 'gpu.yaml');
    writeFileSync(file, 'resources:\n  accelerators: A100:8\n  use_spot: true\nrun: x\n');
    const io = bufferIo();

    expect(await runValidate(file, { json: true }, io)).toBe(0);

    const body = JSON.parse(io.stdout.join('')) as { candidates: unknown[] };
    expect(body.candidates).toContainEqual({ instanceType: 'p4d.24xlarge', vcpus: 96, memoryGib: 1152, gpus: { name: 'A100', count: 8 }, market: 'spot' });
    rmSync(dir, { recursive: true, force: true });
  });

  it('shows each mount with its mode and where its data comes from, and the git workdir', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'relaunch-validate-'));
    const file = join(dir, 'mounts.yaml');
    writeFileSync(
      file,
      [
        'workdir: {url: https://github.com/org/repo.git, ref: v1.2}',
        'file_mounts:',
        '  /data: s3://datasets/imagenet',
        '  ~/config.json: ./config.json',
        '  /checkpoint: {name: team-ckpts, mode: MOUNT_CACHED, persistent: false}',
        '  /scratch: {mode: MOUNT}',
        'run: x',
        '',
      ].join('\n'),
    );
    const json = bufferIo();
    expect(await runValidate(file, { json: true }, json)).toBe(0);
    const body = JSON.parse(json.stdout.join('')) as { spec: { gitWorkdir: unknown; fileMounts: unknown } };
    expect(body.spec.gitWorkdir).toEqual({ url: 'https://github.com/org/repo.git', ref: 'v1.2' });
    expect(body.spec.fileMounts).toEqual([
      { path: '/data', source: { kind: 's3', bucket: 'datasets', key: 'imagenet' }, mode: 'COPY' },
      { path: '~/config.json', source: { kind: 'local', path: './config.json' }, mode: 'COPY' },
      { path: '/checkpoint', source: { kind: 'bucket', name: 'team-ckpts', persistent: false }, mode: 'MOUNT_CACHED' },
      { path: '/scratch', source: { kind: 'bucket', name: null, persistent: true }, mode: 'MOUNT' },
    ]);
    const text = bufferIo();
    expect(await runValidate(file, {}, text)).toBe(0);
    expect(text.stdout.join('\n')).toContain(
      [
        '  workdir       https://github.com/org/repo.git at v1.2 (git)',
        '  mounts        /data <- s3://datasets/imagenet, COPY',
        '                ~/config.json <- ./config.json (local, uploaded at submit), COPY',
        '                /checkpoint <- bucket team-ckpts (deleted after the job), MOUNT_CACHED',
        "                /scratch <- a folder of relaunch's own bucket for this job, MOUNT",
      ].join('\n'),
    );
    rmSync(dir, { recursive: true, force: true });
  });

  it('lists each any_of entry\'s types with its market and place, and warns of an entry that can never launch', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'relaunch-validate-'));
    const file = join(dir, 'any-of.yaml');
    writeFileSync(file, 'resources:\n  accelerators: H100:8\n  any_of:\n    - use_spot: true\n    - cloud: gcp\n    - {use_spot: false, region: us-west-2}\n    - {accelerators: TPU:8}\nrun: x\n');
    const io = bufferIo();

    expect(await runValidate(file, { json: true }, io)).toBe(0);

    const body = JSON.parse(io.stdout.join('')) as { candidates: unknown[]; warnings: { path: string; message: string }[] };
    const h100 = { instanceType: 'p5.48xlarge', vcpus: 192, memoryGib: 2048, gpus: { name: 'H100', count: 8 } };
    expect(body.candidates).toEqual([
      { ...h100, market: 'spot', entry: 0 },
      { ...h100, market: 'on-demand', entry: 2, region: 'us-west-2' },
    ]);
    expect(body.warnings.map((warning) => warning.path)).toEqual(['resources.any_of[1]', 'resources.any_of[3]']);
    expect(body.warnings[1]?.message).toMatch(/unknown accelerator TPU.*; that entry would never launch$/);
    rmSync(dir, { recursive: true, force: true });
  });

  it('warns of an instance type relaunch does not know, in an any_of entry as anywhere', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'relaunch-validate-'));
    const file = join(dir, 'typo.yaml');
    writeFileSync(file, 'resources:\n  any_of:\n    - instance_type: zz9.huge\n    - cpus: 2\nrun: x\n');
    const io = bufferIo();

    expect(await runValidate(file, { json: true }, io)).toBe(0);

    const body = JSON.parse(io.stdout.join('')) as { warnings: { path: string; message: string }[] };
    expect(body.warnings).toContainEqual({ path: 'resources', message: expect.stringMatching(/^zz9\.huge is not a type relaunch knows/) });
    rmSync(dir, { recursive: true, force: true });
  });

  it('warns, and lists no candidate, when no instance type fits the resources', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'relaunch-validate-'));
    const file = join(dir, 'huge.yaml');
    writeFileSync(file, 'resources:\n  cpus: 100000\nrun: x\n---\nrun: y\n');
    const io = bufferIo();

    expect(await runValidate(file, { json: true }, io)).toBe(0);

    const body = JSON.parse(io.stdout.join('')) as { candidates: unknown[][]; warnings: { path: string; message: string }[] };
    expect(body.candidates[0]).toEqual([]);
    expect(body.candidates[1]?.length).toBeGreaterThan(0);
    expect(body.warnings).toContainEqual({ path: 'task 1: resources', message: 'no instance type has cpus 100000; name one with instance_type; a launch would end FAILED_PRECHECKS' });
    rmSync(dir, { recursive: true, force: true });
  });

  it('prints {ok: false, issues: [{path, message, line}]} on stdout and returns 2', async () => {
    const io = bufferIo();
    expect(await runValidate(`${INVALID}exit-code-out-of-range.yaml`, { json: true }, io)).toBe(2);
    expect(io.stderr).toEqual([]);
    expect(JSON.parse(io.stdout.join(''))).toEqual({
      ok: false,
      issues: [
        {
          path: 'resources.job_recovery.recover_on_exit_codes[1]',
          message: 'expected an integer 0-255, got 300',
          line: 7,
        },
      ],
    });
  });

  it('reports an unreadable file the same way', async () => {
    const io = bufferIo();
    expect(await runValidate(join(dir, 'missing.yaml'), { json: true }, io)).toBe(2);
    expect(JSON.parse(io.stdout.join(''))).toEqual({
      ok: false,
      issues: [{ path: join(dir, 'missing.yaml'), message: 'no such file' }],
    });
  });
});

describe('validateCommand', () => {
  it('ends a valid file without error', async () => {
    const io = bufferIo();
    await validateCommand(io).parseAsync([`${VALID}minimal-run.yaml`, '--json'], { from: 'user' });
    expect(JSON.parse(io.stdout.join(''))).toMatchObject({ ok: true, spec: { run: 'echo hello from relaunch' } });
  });

  it('ends an invalid file with a CommanderError carrying exit status 2', async () => {
    const io = bufferIo();
    const ending = validateCommand(io).parseAsync([`${INVALID}cloud-not-aws.yaml`], { from: 'user' });
    await expect(ending).rejects.toThrow(CommanderError);
    await expect(ending).rejects.toMatchObject({ exitCode: 2, code: 'relaunch.exitStatus' });
    expect(io.stderr).toEqual(['error: resources.cloud: relaunch runs on AWS only, got gcp (line 3)']);
  });
});

describe('codeRuns', () => {
  it.each([
    [[], ''],
    [[29], '29'],
    [[1, 2, 3, 7, 9, 10], '1-3, 7, 9-10'],
  ])('writes %j as %j', (codes, text) => {
    expect(codeRuns(codes)).toBe(text);
  });
});

describe('the relaunch binary', () => {
  it('validates a file and exits 0, and exits 2 with the errors on stderr', async () => {
    const ok = await run('node', [BIN, 'validate', `${VALID}minimal-run.yaml`, '--json']);
    expect(JSON.parse(ok.stdout)).toMatchObject({ ok: true, warnings: [] });
    const failed = await run('node', [BIN, 'validate', `${INVALID}cloud-not-aws.yaml`]).catch((error: unknown) => error);
    expect(failed).toMatchObject({
      code: 2,
      stdout: '',
      stderr: 'error: resources.cloud: relaunch runs on AWS only, got gcp (line 3)\n',
    });
  });
});
