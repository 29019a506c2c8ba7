// parseTaskObject, the API's way in: every form each field takes, and how a bad one reads (no lines).

import { describe, expect, it } from 'vitest';
import { formatIssue } from '../../../../lib/errors.ts';
import { parseTaskObject } from '../../../../lib/task-file/parse.ts';
import type { Resources } from '../../../../lib/task-file/types.ts';
import * as fixtures from '../../../support/fixtures/specs.ts';
import { rejectedIssues } from '../../../support/task-file-rejection.ts';

/** The issues a rejected task carries, formatted; fails the test if it is accepted. */
function issuesOf(task: unknown): string[] {
  return rejectedIssues(() => parseTaskObject(task));
}

function resourcesOf(resources: unknown): Resources {
  return parseTaskObject({ run: 'true', resources }).spec.resources;
}

describe('parseTaskObject normalizes', () => {
  it.each([
    ['cpus as a number is exactly that many', { cpus: 2 }, (r: Resources) => r.cpus, { value: 2, orMore: false }],
    ['cpus "1.5 +" is at least 1.5', { cpus: ' 1.5 + ' }, (r: Resources) => r.cpus, { value: 1.5, orMore: true }],
    ['memory in TB is 1024 GB per TB', { memory: '1TB' }, (r: Resources) => r.memoryGb, { value: 1024, orMore: false }],
    ['memory in MB is a fraction of a GB', { memory: '512MB' }, (r: Resources) => r.memoryGb, { value: 0.5, orMore: false }],
    ['memory "16g+" is at least 16 GB', { memory: '16g+' }, (r: Resources) => r.memoryGb, { value: 16, orMore: true }],
    ['disk_size as a number is GB', { disk_size: 256 }, (r: Resources) => r.diskSizeGb, 256],
    ['disk_size "2TB" is 2048 GB', { disk_size: '2TB' }, (r: Resources) => r.diskSizeGb, 2048],
    ['disk_size "100G" is 100 GB', { disk_size: '100G' }, (r: Resources) => r.diskSizeGb, 100],
    ['a repeated accelerator candidate is kept once', { accelerators: ['A100:8', { A100: 8 }] }, (r: Resources) => r.accelerators, [{ name: 'A100', count: 8 }]],
    ['a list item {T4: null} is one T4', { accelerators: [{ T4: null }] }, (r: Resources) => r.accelerators, [{ name: 'T4', count: 1 }]],
    ['a set member "A100:8" keeps its count', { accelerators: { 'A100:8': null } }, (r: Resources) => r.accelerators, [{ name: 'A100', count: 8 }]],
    ['infra AWS in capitals leaves region and zone open', { infra: 'AWS' }, (r: Resources) => [r.region, r.zone], [null, null]],
    ['infra "*" is AWS, the only cloud', { infra: '*' }, (r: Resources) => [r.cloud, r.region], ['aws', null]],
    ['infra "*/us-east-1" names the region', { infra: '*/us-east-1' }, (r: Resources) => [r.region, r.zone], ['us-east-1', null]],
    ['infra "aws/*/us-east-1a" names the zone and so the region', { infra: 'aws/*/us-east-1a' }, (r: Resources) => [r.region, r.zone], ['us-east-1', 'us-east-1a']],
    ['infra and region may both be given when they agree', { infra: 'aws/us-east-1', region: 'us-east-1', cloud: 'aws' }, (r: Resources) => r.region, 'us-east-1'],
    ['infra and zone may both be given when they agree', { infra: 'aws/us-east-1/us-east-1a', zone: 'us-east-1a' }, (r: Resources) => r.zone, 'us-east-1a'],
    ['a zone in the region asked for', { region: 'us-west-2', zone: 'us-west-2-lax-1a' }, (r: Resources) => [r.region, r.zone], ['us-west-2', 'us-west-2-lax-1a']],
    ['job_recovery "none" is the default strategy', { job_recovery: 'none' }, (r: Resources) => r.jobRecovery.strategy, 'EAGER_NEXT_REGION'],
    ['strategy "none" in a mapping is the default strategy', { job_recovery: { strategy: 'none' } }, (r: Resources) => r.jobRecovery.strategy, 'EAGER_NEXT_REGION'],
    ['a strategy name in any case', { job_recovery: 'Eager_Next_Region' }, (r: Resources) => r.jobRecovery.strategy, 'EAGER_NEXT_REGION'],
    ['strategy none beside other keys keeps them', { job_recovery: { strategy: 'none', max_restarts_on_errors: 2 } }, (r: Resources) => [r.jobRecovery.strategy, r.jobRecovery.maxRestartsOnErrors], ['EAGER_NEXT_REGION', 2]],
    ['a strategy with no value is the default strategy, as in SkyPilot', { job_recovery: { strategy: null } }, (r: Resources) => r.jobRecovery.strategy, 'EAGER_NEXT_REGION'],
    ['a strategy with no value keeps the keys beside it', { job_recovery: { strategy: null, max_restarts_on_errors: 2, recover_on_exit_codes: 29 } }, (r: Resources) => [r.jobRecovery.strategy, r.jobRecovery.maxRestartsOnErrors, r.jobRecovery.recoverOnExitCodes], ['EAGER_NEXT_REGION', 2, [29]]],
    ['the runaway bounds take their defaults', { job_recovery: {} }, (r: Resources) => [r.jobRecovery.launchTimeoutSeconds, r.jobRecovery.bootTimeoutSeconds, r.jobRecovery.maxBootFailures, r.jobRecovery.maxRecoveries], [null, 600, 3, null]],
    ['a strategy name alone takes the bounds\' defaults too', { job_recovery: 'FAILOVER' }, (r: Resources) => [r.jobRecovery.launchTimeoutSeconds, r.jobRecovery.bootTimeoutSeconds, r.jobRecovery.maxBootFailures, r.jobRecovery.maxRecoveries], [null, 600, 3, null]],
    ['boot_timeout in minutes is seconds', { job_recovery: { boot_timeout: '20m' } }, (r: Resources) => r.jobRecovery.bootTimeoutSeconds, 1200],
    ['boot_timeout at its bounds, 1s and 1 day', { job_recovery: { boot_timeout: '1s' } }, (r: Resources) => r.jobRecovery.bootTimeoutSeconds, 1],
    ['boot_timeout of exactly a day', { job_recovery: { boot_timeout: '24h' } }, (r: Resources) => r.jobRecovery.bootTimeoutSeconds, 86_400],
    ['launch_timeout in hours is seconds', { job_recovery: { launch_timeout: '6h' } }, (r: Resources) => r.jobRecovery.launchTimeoutSeconds, 21_600],
    ['launch_timeout in several units adds them', { job_recovery: { launch_timeout: '1d2h3m4s' } }, (r: Resources) => r.jobRecovery.launchTimeoutSeconds, 93_784],
    ['launch_timeout 0s is allowed', { job_recovery: { launch_timeout: '0s' } }, (r: Resources) => r.jobRecovery.launchTimeoutSeconds, 0],
    ['launch_timeout at its limit, 365 days', { job_recovery: { launch_timeout: '365d' } }, (r: Resources) => r.jobRecovery.launchTimeoutSeconds, 31_536_000],
    ['launch_on_warning is off by default', { job_recovery: {} }, (r: Resources) => r.jobRecovery.launchOnWarning, false],
    ['launch_on_warning true starts on the interruption warning', { job_recovery: { launch_on_warning: true } }, (r: Resources) => r.jobRecovery.launchOnWarning, true],
    ['launch_on_warning rebalance also starts on the rebalance recommendation', { job_recovery: { launch_on_warning: 'rebalance' } }, (r: Resources) => r.jobRecovery.launchOnWarning, 'rebalance'],
    ['a strategy name alone leaves launch_on_warning off', { job_recovery: 'FAILOVER' }, (r: Resources) => r.jobRecovery.launchOnWarning, false],
    ['max_boot_failures and max_recoveries as given', { job_recovery: { max_boot_failures: 1, max_recoveries: 0 } }, (r: Resources) => [r.jobRecovery.maxBootFailures, r.jobRecovery.maxRecoveries], [1, 0]],
    ['restart_backoff at 7 days exactly', { job_recovery: { restart_backoff: { initial_seconds: 604_800 } } }, (r: Resources) => r.jobRecovery.restartBackoff, { initialSeconds: 604_800, factor: 2, maxSeconds: 604_800, jitter: 'full' }],
    ['spot_recovery in mapping form', { spot_recovery: { strategy: 'failover', max_restarts_on_errors: 2 } }, (r: Resources) => [r.jobRecovery.strategy, r.jobRecovery.maxRestartsOnErrors], ['FAILOVER', 2]],
    ['one range string is its codes', { job_recovery: { recover_on_exit_codes: '64-66' } }, (r: Resources) => r.jobRecovery.recoverOnExitCodes, [64, 65, 66]],
    ['a code as a string is that code', { job_recovery: { fail_on_exit_codes: ['29', 3] } }, (r: Resources) => r.jobRecovery.failOnExitCodes, [3, 29]],
    ['an empty code list is no codes', { job_recovery: { recover_on_exit_codes: [] } }, (r: Resources) => r.jobRecovery.recoverOnExitCodes, []],
    ['null resources take every default', null, (r: Resources) => [r.useSpot, r.accelerators, r.jobRecovery.restartBackoff], [false, [], null]],
    ['a key with no value takes its default', { use_spot: null, cpus: null, job_recovery: null }, (r: Resources) => [r.useSpot, r.cpus, r.jobRecovery.maxRestartsOnErrors], [false, null, 0]],
    ['reuse_nodes true reuses and reruns setup', { job_recovery: { reuse_nodes: true } }, (r: Resources) => r.jobRecovery.reuseNodes, { reuse: true, setup: 'rerun' }],
    ['reuse_nodes false launches fresh nodes', { job_recovery: { strategy: 'FAILOVER', reuse_nodes: false } }, (r: Resources) => r.jobRecovery.reuseNodes, { reuse: false, setup: 'rerun' }],
    ['reuse_nodes {setup: skip} reuses and skips setup', { job_recovery: { reuse_nodes: { setup: 'skip' } } }, (r: Resources) => r.jobRecovery.reuseNodes, { reuse: true, setup: 'skip' }],
    ['reuse_nodes {setup: rerun} reuses and reruns setup', { job_recovery: { reuse_nodes: { setup: 'rerun' } } }, (r: Resources) => r.jobRecovery.reuseNodes, { reuse: true, setup: 'rerun' }],
    ['reuse_nodes as an empty mapping is reuse with setup rerun', { job_recovery: { reuse_nodes: {} } }, (r: Resources) => r.jobRecovery.reuseNodes, { reuse: true, setup: 'rerun' }],
    ['reuse_nodes and bad_node_exit_codes left out are absent: the strategy decides', { job_recovery: { strategy: 'FAILOVER' } }, (r: Resources) => ['reuseNodes' in r.jobRecovery, 'badNodeExitCodes' in r.jobRecovery], [false, false]],
    ['a strategy name alone has no reuse_nodes either', { job_recovery: 'FAILOVER' }, (r: Resources) => r.jobRecovery.reuseNodes, undefined],
    ['bad_node_exit_codes as one code', { job_recovery: { bad_node_exit_codes: 42 } }, (r: Resources) => r.jobRecovery.badNodeExitCodes, [42]],
    ['bad_node_exit_codes with a range, sorted', { job_recovery: { bad_node_exit_codes: [99, '64-66', '42'] } }, (r: Resources) => r.jobRecovery.badNodeExitCodes, [42, 64, 65, 66, 99]],
    ['bad_node_exit_codes empty is no codes', { job_recovery: { bad_node_exit_codes: [] } }, (r: Resources) => r.jobRecovery.badNodeExitCodes, []],
    ['a bad-node code may also be in recover_on_exit_codes', { job_recovery: { recover_on_exit_codes: [42], bad_node_exit_codes: [42] } }, (r: Resources) => [r.jobRecovery.recoverOnExitCodes, r.jobRecovery.badNodeExitCodes], [[42], [42]]],
    ['an exit code list of exactly 256 items', { job_recovery: { recover_on_exit_codes: Array.from({ length: 256 }, (_, code) => code) } }, (r: Resources) => r.jobRecovery.recoverOnExitCodes.length, 256],
  ])('%s', (_name, resources, pick, expected) => {
    expect(pick(resourcesOf(resources))).toEqual(expected);
  });

  it('envs: numbers as JavaScript writes them, booleans as SkyPilot writes them, no value as empty', () => {
    const { spec } = parseTaskObject({ run: 'env', envs: { RATE: 1.5, BIG: 1e21, ON: true, OFF: false, EMPTY: null, TEXT: 'x' } });
    expect(spec.envs).toEqual({ RATE: '1.5', BIG: '1e+21', ON: 'True', OFF: 'False', EMPTY: '', TEXT: 'x' });
  });

  it('a task without resources gets the defaults the test fixtures are built on', () => {
    expect(parseTaskObject({ run: 'true' }).spec.resources).toEqual(fixtures.resources());
  });

  it('a task with only defaults is one node, no envs, no name, and warns that it does nothing', () => {
    const parsed = parseTaskObject({ num_nodes: null, envs: null, name: null });
    expect(parsed.spec).toMatchObject({ name: null, numNodes: 1, envs: {}, setup: null, run: null });
    expect(parsed.warnings).toEqual([{ path: '', message: 'neither setup nor run is given: the job does nothing and succeeds' }]);
  });

  it.each([
    ['137 with nothing to cap or pace it says what bound to add', { recover_on_exit_codes: [137] }, 1,
      ['resources.job_recovery.recover_on_exit_codes: 137 is SIGKILL, usually out of memory: a job killed that way every time restarts forever, each time at once; add max_restarts_on_exit_codes to cap it (or restart_backoff to pause between restarts)']],
    ['137 with a backoff but no cap', { recover_on_exit_codes: [137], restart_backoff: {} }, 1,
      ['resources.job_recovery.recover_on_exit_codes: 137 is SIGKILL, usually out of memory: a job killed that way every time restarts forever; add max_restarts_on_exit_codes to cap it']],
    ['137 with a cap', { recover_on_exit_codes: [137], max_restarts_on_exit_codes: 4 }, 1,
      ['resources.job_recovery.recover_on_exit_codes: 137 is SIGKILL, usually out of memory: a job killed that way every time restarts 4 times before it fails']],
    ['0 on a single node changes nothing', { recover_on_exit_codes: [0], max_restarts_on_exit_codes: 1 }, 1,
      ['resources.job_recovery.recover_on_exit_codes: 0 is success: a single node that exits 0 succeeds, so 0 here changes nothing']],
    ['0 on several nodes restarts beside a failure', { recover_on_exit_codes: [0], max_restarts_on_exit_codes: 1 }, 2,
      ["resources.job_recovery.recover_on_exit_codes: 0 is success: relaunch matches every node's code, so when one node has exited 0 and another fails, the attempt restarts by this list, uncharged, instead of counting as a failure; when every node exits 0 the job still succeeds"]],
    ['strategy none beside other keys', { strategy: 'none', max_restarts_on_errors: 1, max_recoveries: 3 }, 1,
      ['resources.job_recovery.strategy: none beside other keys (max_restarts_on_errors, max_recoveries): relaunch applies those with the default strategy, but SkyPilot ignores the whole job_recovery mapping when strategy is none; leave strategy out to mean the same in both']],
    ['strategy none alone is SkyPilot\'s default, no warning', { strategy: 'none' }, 1, []],
    ['a code other than 137 without a cap warns only on review', { recover_on_exit_codes: [29] }, 1, []],
  ])('warns: %s', (_name, jobRecovery, numNodes, expected) => {
    const { warnings } = parseTaskObject({ run: 'x', num_nodes: numNodes, resources: { job_recovery: jobRecovery } });
    expect(warnings.map(formatIssue)).toEqual(expected);
  });

  it.each([
    ['on an on-demand task, launch_on_warning has nothing to warn of', { use_spot: false, job_recovery: { launch_on_warning: true } },
      ['resources.job_recovery.launch_on_warning: has no effect: the task does not use spot (use_spot is not true), and EC2 warns only of spot instances']],
    ['on a spot task it is quiet', { use_spot: true, job_recovery: { launch_on_warning: 'rebalance' } }, []],
    ['launch_on_warning false is quiet anywhere', { use_spot: false, job_recovery: { launch_on_warning: false } }, []],
    ['bad_node_exit_codes under the default strategy keeps no node to replace', { job_recovery: { bad_node_exit_codes: [42] } },
      ['resources.job_recovery.bad_node_exit_codes: has no effect: under the EAGER_NEXT_REGION strategy every relaunch runs on fresh nodes; set reuse_nodes: true (or strategy: FAILOVER) to keep the healthy ones and replace only a bad one']],
    ['bad_node_exit_codes beside reuse_nodes false', { job_recovery: { strategy: 'FAILOVER', reuse_nodes: false, bad_node_exit_codes: [42] } },
      ['resources.job_recovery.bad_node_exit_codes: has no effect: reuse_nodes is false, so every relaunch runs on fresh nodes and no node is kept to be told apart']],
    ['bad_node_exit_codes under FAILOVER is quiet', { job_recovery: { strategy: 'FAILOVER', bad_node_exit_codes: [42] } }, []],
    ['bad_node_exit_codes with reuse_nodes {setup: skip} is quiet', { job_recovery: { reuse_nodes: { setup: 'skip' }, bad_node_exit_codes: [42] } }, []],
  ])('warns: %s', (_name, resources, expected) => {
    const { warnings } = parseTaskObject({ run: 'x', resources });
    expect(warnings.map(formatIssue)).toEqual(expected);
  });

  it('warns about the spot_recovery name, and points the other warnings at it', () => {
    const { warnings } = parseTaskObject({ run: 'x', resources: { spot_recovery: { strategy: 'none', recover_on_exit_codes: 0 } } });
    expect(warnings.map(formatIssue)).toEqual([
      'resources.spot_recovery: a legacy name: SkyPilot renamed it job_recovery and removed spot_recovery in February 2025; relaunch still reads it as job_recovery',
      'resources.spot_recovery.strategy: none beside other keys (recover_on_exit_codes): relaunch applies those with the default strategy, but SkyPilot ignores the whole job_recovery mapping when strategy is none; leave strategy out to mean the same in both',
      'resources.spot_recovery.recover_on_exit_codes: 0 is success: a single node that exits 0 succeeds, so 0 here changes nothing',
    ]);
  });

  const UNBOUNDED =
    'resources.job_recovery.recover_on_exit_codes: no cap and no pause: a listed code that comes back on every attempt relaunches the job forever, each time at once; ' +
    'add max_restarts_on_exit_codes (a cap, past which the code is an ordinary failure) or restart_backoff (a wait between relaunches)';

  it.each([
    ['a code with no cap and no backoff', { recover_on_exit_codes: [29] }, [UNBOUNDED]],
    ['a range with no cap and no backoff', { recover_on_exit_codes: '64-78' }, [UNBOUNDED]],
    ['a cap bounds it', { recover_on_exit_codes: [29], max_restarts_on_exit_codes: 10 }, []],
    ['a backoff paces it', { recover_on_exit_codes: [29], restart_backoff: { initial_seconds: 30 } }, []],
    ['no codes, nothing to bound', { max_restarts_on_errors: 3 }, []],
    ['137 is warned about once, with the bound to add', { recover_on_exit_codes: [29, 137] }, [
      'resources.job_recovery.recover_on_exit_codes: 137 is SIGKILL, usually out of memory: a job killed that way every time restarts forever, each time at once; add max_restarts_on_exit_codes to cap it (or restart_backoff to pause between restarts)',
    ]],
  ])('a review (relaunch validate) also warns about an unbounded, unpaced policy: %s', (_name, jobRecovery, expected) => {
    const task = { run: 'x', resources: { job_recovery: jobRecovery } };
    expect(parseTaskObject(task, { review: true }).warnings.map(formatIssue)).toEqual(expected);
  });
});

const STRATEGY = 'expected EAGER_NEXT_REGION or FAILOVER in any case, or a lowercase none,';
const NONE_HINT = '(only the lowercase none means the default strategy, as in SkyPilot)';
const LAUNCH = 'expected a duration from 0s to 365d such as 6h, 30m or 90s,';
const REUSE = 'expected true, false, or a mapping {setup: skip or rerun},';
const BOOT_TIMEOUT = 'expected a duration from 1s to 1d such as 10m or 90s,';

describe('parseTaskObject rejects', () => {
  const long = `a b ${'x'.repeat(100)}`;
  it.each([
    ['null', null, ['expected a task (a mapping with run, resources, ...), got null']],
    ['an empty list', [], ['expected a task (a mapping with run, resources, ...), got an empty list']],
    ['a string, even one that is YAML', 'run: x', ['expected a task (a mapping with run, resources, ...), got "run: x"']],
    ['"yes" for use_spot: YAML 1.1 words are booleans only as plain YAML', { resources: { use_spot: 'yes' } }, ['resources.use_spot: expected true or false, got "yes"']],
    ['a name too long to show whole', { name: long }, [`name: expected a name of letters and digits joined by . _ or - (such as train-llama), got "${long.slice(0, 60)}..."`]],
    ['a name that is not a string', { name: 5 }, ['name: expected a name of letters and digits joined by . _ or - (such as train-llama), got 5']],
    ['an empty workdir', { workdir: '' }, ['workdir: expected a local directory path, got ""']],
    ['an env value that is a mapping', { envs: { A: { b: 1 } } }, ['envs.A: expected a string, a number, true/false or nothing, got a mapping']],
    ['cpus true', { resources: { cpus: true } }, ['resources.cpus: expected a number of CPUs > 0 such as 4, or 4+ for at least 4, got true']],
    ['cpus "0+"', { resources: { cpus: '0+' } }, ['resources.cpus: expected a number of CPUs > 0 such as 4, or 4+ for at least 4, got "0+"']],
    ['cpus Infinity', { resources: { cpus: Infinity } }, ['resources.cpus: expected a number of CPUs > 0 such as 4, or 4+ for at least 4, got Infinity']],
    ['memory in PB', { resources: { memory: '4 PB' } }, ['resources.memory: expected memory in GB > 0 such as 32, 32+ for at least 32, or 64GB+, got "4 PB"']],
    ['disk_size in MB that is not whole GB', { resources: { disk_size: '100MB' } }, ['resources.disk_size: expected a whole number of GB such as 256, 1024GB or 1TB, got "100MB"']],
    ['accelerators as a number', { resources: { accelerators: 5 } }, ['resources.accelerators: expected an accelerator such as A100:8 or L4, a mapping such as {H100: 8, H200: 8} or a list of them, got 5']],
    ['an empty accelerator list', { resources: { accelerators: [] } }, ['resources.accelerators: expected an accelerator such as A100:8 or L4, a mapping such as {H100: 8, H200: 8} or a list of them, got an empty list']],
    ['a bad accelerator name with a count', { resources: { accelerators: { 'bad name': 1 } } }, ['resources.accelerators["bad name"]: expected an accelerator such as A100:8 or L4, got "bad name"']],
    ['an empty image mapping', { resources: { image_id: {} } }, ['resources.image_id: expected a mapping of region to AMI id, got an empty mapping']],
    ['an image id that is a list', { resources: { image_id: ['ami-0123456789abcdef0'] } }, ['resources.image_id: expected an AMI id such as ami-0123456789abcdef0, skypilot:ALIAS, docker:IMAGE, or a mapping of region to AMI id, got a list']],
    ['infra that is not a string', { resources: { infra: 5 } }, ['resources.infra: expected aws, aws/REGION or aws/REGION/ZONE, got 5']],
    ['infra with no cloud', { resources: { infra: '/us-east-1' } }, ['resources.infra: expected aws, aws/REGION or aws/REGION/ZONE, got "/us-east-1"']],
    ['infra with a GCP region', { resources: { infra: 'aws/us-central1' } }, ['resources.infra: expected an AWS region such as us-east-1 after aws/, got "aws/us-central1"']],
    ['infra with a bad zone and any region', { resources: { infra: 'aws/*/central-a' } }, ['resources.infra: expected an AWS availability zone after the region, such as aws/us-east-1/us-east-1a, got "aws/*/central-a"']],
    ['infra region with a zone key elsewhere', { resources: { infra: 'aws/us-east-1', zone: 'us-west-2a' } }, ['resources.zone: expected a zone of us-east-1, got "us-west-2a"']],
    ['a strategy that is not a string', { resources: { job_recovery: { strategy: 5 } } }, [`resources.job_recovery.strategy: ${STRATEGY} got 5`]],
    ['strategy NONE: only the lowercase none is the default', { resources: { job_recovery: { strategy: 'NONE' } } }, [`resources.job_recovery.strategy: ${STRATEGY} got "NONE" ${NONE_HINT}`]],
    ['job_recovery None', { resources: { job_recovery: 'None' } }, [`resources.job_recovery: ${STRATEGY} got "None" ${NONE_HINT}`]],
    ['spot_recovery NONE', { resources: { spot_recovery: 'NONE' } }, [`resources.spot_recovery: ${STRATEGY} got "NONE" ${NONE_HINT}`]],
    ['recover_on_exit_codes with no value', { resources: { job_recovery: { recover_on_exit_codes: null } } }, ['resources.job_recovery.recover_on_exit_codes: expected an exit code 0-255 or a list of them, got no value; leave the key out for the default (no codes)']],
    ['a duration with a space', { resources: { job_recovery: { launch_timeout: '1h 30m' } } }, [`resources.job_recovery.launch_timeout: ${LAUNCH} got "1h 30m"`]],
    ['a duration in words', { resources: { job_recovery: { launch_timeout: '6 hours' } } }, [`resources.job_recovery.launch_timeout: ${LAUNCH} got "6 hours"`]],
    ['a duration with its units out of order', { resources: { job_recovery: { launch_timeout: '30m1h' } } }, [`resources.job_recovery.launch_timeout: ${LAUNCH} got "30m1h"`]],
    ['an empty duration', { resources: { job_recovery: { launch_timeout: '' } } }, [`resources.job_recovery.launch_timeout: ${LAUNCH} got ""`]],
    ['a duration in milliseconds', { resources: { job_recovery: { launch_timeout: '500ms' } } }, [`resources.job_recovery.launch_timeout: ${LAUNCH} got "500ms"`]],
    ['a fractional duration', { resources: { job_recovery: { launch_timeout: '1.5h' } } }, [`resources.job_recovery.launch_timeout: ${LAUNCH} got "1.5h"`]],
    ['a duration as a bare number says which unit to add', { resources: { job_recovery: { launch_timeout: 90 } } }, [`resources.job_recovery.launch_timeout: ${LAUNCH} got 90 (give a unit: 90s is 90 seconds)`]],
    ['a duration that is a mapping', { resources: { job_recovery: { launch_timeout: { minutes: 5 } } } }, [`resources.job_recovery.launch_timeout: ${LAUNCH} got a mapping`]],
    ['launch_timeout one second past 365 days', { resources: { job_recovery: { launch_timeout: '365d1s' } } }, [`resources.job_recovery.launch_timeout: ${LAUNCH} got "365d1s"`]],
    ['boot_timeout of 0s: the clock cannot be off', { resources: { job_recovery: { boot_timeout: '0s' } } }, [`resources.job_recovery.boot_timeout: ${BOOT_TIMEOUT} got "0s"`]],
    ['boot_timeout one second past a day', { resources: { job_recovery: { boot_timeout: '1d1s' } } }, [`resources.job_recovery.boot_timeout: ${BOOT_TIMEOUT} got "1d1s"`]],
    ['boot_timeout as a bare number says which unit to add', { resources: { job_recovery: { boot_timeout: 600 } } }, [`resources.job_recovery.boot_timeout: ${BOOT_TIMEOUT} got 600 (give a unit: 600s is 600 seconds)`]],
    ['boot_timeout with no value', { resources: { job_recovery: { boot_timeout: null } } }, ['resources.job_recovery.boot_timeout: expected a duration from 1s to 1d such as 10m or 90s, got no value; leave the key out for the default (10m)']],
    ['boot_timeout beside a valid max_boot_failures: only boot_timeout is refused', { resources: { job_recovery: { boot_timeout: '-5m', max_boot_failures: 5 } } }, [`resources.job_recovery.boot_timeout: ${BOOT_TIMEOUT} got "-5m"`]],
    ['boot_timeout under the older name spot_recovery', { resources: { spot_recovery: { boot_timeout: '0s' } } }, [`resources.spot_recovery.boot_timeout: ${BOOT_TIMEOUT} got "0s"`]],
    ['boot_timeout at the top level points to where it belongs', { boot_timeout: '15m', run: 'x' }, ['boot_timeout: unknown key here, did you mean `resources.job_recovery.boot_timeout`?']],
    ['max_boot_failures fractional', { resources: { job_recovery: { max_boot_failures: 2.5 } } }, ['resources.job_recovery.max_boot_failures: expected an integer >= 1, got 2.5']],
    ['launch_on_warning as a quoted "true" says to drop the quotes', { resources: { job_recovery: { launch_on_warning: 'true' } } }, ['resources.job_recovery.launch_on_warning: expected true, false or rebalance, got "true" (write it without quotes)']],
    ['launch_on_warning in another case', { resources: { job_recovery: { launch_on_warning: 'Rebalance' } } }, ['resources.job_recovery.launch_on_warning: expected true, false or rebalance, got "Rebalance"']],
    ['launch_on_warning as a number', { resources: { job_recovery: { launch_on_warning: 1 } } }, ['resources.job_recovery.launch_on_warning: expected true, false or rebalance, got 1']],
    ['launch_on_warning with no value', { resources: { job_recovery: { launch_on_warning: null } } }, ['resources.job_recovery.launch_on_warning: expected true, false or rebalance, got no value; leave the key out for the default (false)']],
    ['launch_on_warning at the top level points to where it belongs', { launch_on_warning: true, run: 'x' }, ['launch_on_warning: unknown key here, did you mean `resources.job_recovery.launch_on_warning`?']],
    ['max_recoveries as a string', { resources: { job_recovery: { max_recoveries: '3' } } }, ['resources.job_recovery.max_recoveries: expected an integer >= 0, got "3"']],
    ['restart_backoff max_seconds one past 7 days', { resources: { job_recovery: { restart_backoff: { max_seconds: 604_801 } } } }, ['resources.job_recovery.restart_backoff.max_seconds: expected a whole number of seconds from 0 to 604800 (7 days), got 604801']],
    ['DYNAMIC_NODE_SET\'s min_nodes is an unknown key', { resources: { job_recovery: { min_nodes: 2 } } }, ['resources.job_recovery.min_nodes: unknown key']],
    ['a restart_backoff with an unknown key', { resources: { job_recovery: { restart_backoff: { jitter: 'full', step: 1 } } } }, ['resources.job_recovery.restart_backoff.step: unknown key']],
    ['reuse_nodes as a quoted "true" says to drop the quotes', { resources: { job_recovery: { reuse_nodes: 'true' } } }, [`resources.job_recovery.reuse_nodes: ${REUSE} got "true" (write it without quotes)`]],
    ['reuse_nodes as a number', { resources: { job_recovery: { reuse_nodes: 1 } } }, [`resources.job_recovery.reuse_nodes: ${REUSE} got 1`]],
    ['reuse_nodes as a word', { resources: { job_recovery: { reuse_nodes: 'skip' } } }, [`resources.job_recovery.reuse_nodes: ${REUSE} got "skip"`]],
    ['reuse_nodes as a list', { resources: { job_recovery: { reuse_nodes: [true] } } }, [`resources.job_recovery.reuse_nodes: ${REUSE} got a list`]],
    ['reuse_nodes with no value', { resources: { job_recovery: { reuse_nodes: null } } }, [`resources.job_recovery.reuse_nodes: ${REUSE} got no value; leave the key out for the default (the strategy's: FAILOVER reuses nodes, EAGER_NEXT_REGION launches fresh ones)`]],
    ['reuse_nodes setup in another case', { resources: { job_recovery: { reuse_nodes: { setup: 'Skip' } } } }, ['resources.job_recovery.reuse_nodes.setup: expected skip or rerun, got "Skip"']],
    ['reuse_nodes setup as a boolean', { resources: { job_recovery: { reuse_nodes: { setup: false } } } }, ['resources.job_recovery.reuse_nodes.setup: expected skip or rerun, got false']],
    ['reuse_nodes setup with no value', { resources: { job_recovery: { reuse_nodes: { setup: null } } } }, ['resources.job_recovery.reuse_nodes.setup: expected skip or rerun, got no value; leave the key out for the default (rerun)']],
    ['a misspelt setup is refused, never read as rerun', { resources: { job_recovery: { reuse_nodes: { setpu: 'skip' } } } }, ['resources.job_recovery.reuse_nodes.setpu: unknown key: a reuse_nodes mapping takes only setup (skip or rerun)']],
    ['reuse_nodes with a key beside setup', { resources: { job_recovery: { reuse_nodes: { setup: 'skip', reuse: false } } } }, ['resources.job_recovery.reuse_nodes.reuse: unknown key: a reuse_nodes mapping takes only setup (skip or rerun)']],
    ['reuse_nodes at the top level points to where it belongs', { reuse_nodes: true, run: 'x' }, ['reuse_nodes: unknown key here, did you mean `resources.job_recovery.reuse_nodes`?']],
    ['bad_node_exit_codes 0: a node that exits 0 is not bad', { resources: { job_recovery: { bad_node_exit_codes: 0 } } }, ['resources.job_recovery.bad_node_exit_codes: expected non-zero codes (0 is success: a node that exits 0 is never the bad one), got 0']],
    ['bad_node_exit_codes with a range that holds 0', { resources: { job_recovery: { bad_node_exit_codes: ['0-3'] } } }, ['resources.job_recovery.bad_node_exit_codes: expected non-zero codes (0 is success: a node that exits 0 is never the bad one), got 0']],
    ['bad_node_exit_codes negative, too large, fractional, a word', { resources: { job_recovery: { bad_node_exit_codes: [-1, 256, 4.5, 'gpu', '1-300'] } } }, [
      'resources.job_recovery.bad_node_exit_codes[0]: expected an integer 0-255, got -1',
      'resources.job_recovery.bad_node_exit_codes[1]: expected an integer 0-255, got 256',
      'resources.job_recovery.bad_node_exit_codes[2]: expected an integer 0-255, got 4.5',
      'resources.job_recovery.bad_node_exit_codes[3]: expected an integer 0-255 or a range such as "64-78", got "gpu"',
      'resources.job_recovery.bad_node_exit_codes[4]: expected a range within 0-255, got "1-300"',
    ]],
    ['bad_node_exit_codes as a mapping', { resources: { job_recovery: { bad_node_exit_codes: { 42: 'gpu' } } } }, ['resources.job_recovery.bad_node_exit_codes: expected an integer 0-255 or a range such as "64-78", got a mapping']],
    ['bad_node_exit_codes as a boolean', { resources: { job_recovery: { bad_node_exit_codes: true } } }, ['resources.job_recovery.bad_node_exit_codes: expected an integer 0-255 or a range such as "64-78", got true']],
    ['bad_node_exit_codes with no value', { resources: { job_recovery: { bad_node_exit_codes: null } } }, ['resources.job_recovery.bad_node_exit_codes: expected a non-zero exit code 1-255 or a list of them, got no value; leave the key out for the default (no codes)']],
    ['bad_node_exit_codes with a code twice', { resources: { job_recovery: { bad_node_exit_codes: [42, '40-45'] } } }, ['resources.job_recovery.bad_node_exit_codes[1]: expected unique exit codes, got 42 again (also in [0])']],
    ['a huge bad_node_exit_codes list is one problem, not one per item', { resources: { job_recovery: { bad_node_exit_codes: Array.from({ length: 100_000 }, () => 1) } } }, ['resources.job_recovery.bad_node_exit_codes: expected at most 256 items, each code 0-255 once (ranges such as "64-78" cover many), got a list of 100000']],
    ['a huge recover_on_exit_codes list likewise', { resources: { job_recovery: { recover_on_exit_codes: Array.from({ length: 257 }, (_, index) => index % 256) } } }, ['resources.job_recovery.recover_on_exit_codes: expected at most 256 items, each code 0-255 once (ranges such as "64-78" cover many), got a list of 257']],
    ['a bad-node code that also fails the job', { resources: { job_recovery: { fail_on_exit_codes: [3, 42], bad_node_exit_codes: ['40-42'] } } }, ['resources.job_recovery.bad_node_exit_codes: expected codes not in fail_on_exit_codes (a code there ends the job, so no relaunch replaces the node), got 42 in both']],
    ['bad_node_exit_codes at the top level points to where it belongs', { bad_node_exit_codes: [42], run: 'x' }, ['bad_node_exit_codes: unknown key here, did you mean `resources.job_recovery.bad_node_exit_codes`?']],
  ])('%s', (_name, task, expected) => {
    expect(issuesOf(task)).toEqual(expected);
  });
});
