// Placement: which zones and instance types an attempt tries, in which order, per strategy.

import { describe, expect, it } from 'vitest';
import { PrecheckError } from '../../../lib/errors.ts';
import { architectureOf, hasEfa, hasGpus } from '../../../lib/instance-types.ts';
import { instanceTypesFor, planPlacements, type PlacementInput } from '../../../lib/launch-plan.ts';
import type { LaunchRequest } from '../../../lib/ports.ts';
import type { Accelerator, Quantity, RecoveryStrategy, Resources, TaskSpec } from '../../../lib/task-file/types.ts';
import { resources, taskSpec } from '../../support/fixtures/specs.ts';

function spec(overrides: Partial<Resources> = {}, strategy: RecoveryStrategy = 'EAGER_NEXT_REGION'): TaskSpec {
  const base = resources(overrides);
  return taskSpec({
    name: 'job',
    setup: null,
    run: 'true',
    resources: { ...base, jobRecovery: { ...base.jobRecovery, strategy } },
  });
}

const exactly = (value: number): Quantity => ({ value, orMore: false });
const atLeast = (value: number): Quantity => ({ value, orMore: true });
const gpu = (name: string, count: number): Accelerator => ({ name, count });

const REGIONS = ['us-east-1', 'us-west-2'];
const ZONES = { 'us-east-1': ['us-east-1a', 'us-east-1b'], 'us-west-2': ['us-west-2a', 'us-west-2b'] };

function ended(region: string, zone: string | null, outcome: LaunchRequest['history'][number]['outcome']): LaunchRequest['history'] {
  return [{ placement: { region, zone, instanceType: 'm6i.2xlarge' }, outcome }];
}

function places(input: Partial<PlacementInput> & Pick<PlacementInput, 'spec'>): string[] {
  return planPlacements({ history: [], regions: REGIONS, zonesByRegion: ZONES, ...input }).map(
    (candidate) => candidate.zone ?? `${candidate.region}:any`,
  );
}

describe('planPlacements: the order of zones', () => {
  it.each([
    ['a first attempt follows the configured order', spec(), [], ['us-east-1a', 'us-east-1b', 'us-west-2a', 'us-west-2b']],
    [
      'EAGER_NEXT_REGION after a preemption tries other regions, then other zones, the lost zone last',
      spec(),
      ended('us-east-1', 'us-east-1b', 'PREEMPTED'),
      ['us-west-2a', 'us-west-2b', 'us-east-1a', 'us-east-1b'],
    ],
    [
      'EAGER_NEXT_REGION treats a lost instance like a preemption',
      spec(),
      ended('us-west-2', 'us-west-2a', 'LOST'),
      ['us-east-1a', 'us-east-1b', 'us-west-2b', 'us-west-2a'],
    ],
    [
      'EAGER_NEXT_REGION after a user-code failure keeps the configured order',
      spec(),
      ended('us-west-2', 'us-west-2b', 'EXITED'),
      ['us-east-1a', 'us-east-1b', 'us-west-2a', 'us-west-2b'],
    ],
    [
      'FAILOVER retries the same zone, then its region, then the others',
      spec({}, 'FAILOVER'),
      ended('us-west-2', 'us-west-2b', 'PREEMPTED'),
      ['us-west-2b', 'us-west-2a', 'us-east-1a', 'us-east-1b'],
    ],
    [
      'FAILOVER stays put after a user-code failure too',
      spec({}, 'FAILOVER'),
      ended('us-east-1', 'us-east-1b', 'EXITED'),
      ['us-east-1b', 'us-east-1a', 'us-west-2a', 'us-west-2b'],
    ],
    ['resources.region keeps to that region', spec({ region: 'us-west-2' }), [], ['us-west-2a', 'us-west-2b']],
    [
      'resources.zone is the only place, even after it was preempted',
      spec({ region: 'us-east-1', zone: 'us-east-1b' }),
      ended('us-east-1', 'us-east-1b', 'PREEMPTED'),
      ['us-east-1b'],
    ],
    ['a zone without a region finds its region', spec({ zone: 'us-west-2a' }), [], ['us-west-2a']],
  ])('%s', (_name, taskSpec, history, expected) => {
    expect(places({ spec: taskSpec, history })).toEqual(expected);
  });

  it('only the newest attempt decides where to go next', () => {
    const history = [...ended('us-east-1', 'us-east-1a', 'EXITED'), ...ended('us-west-2', 'us-west-2a', 'PREEMPTED')];
    expect(places({ spec: spec(), history })).toEqual(['us-east-1a', 'us-east-1b', 'us-west-2a', 'us-west-2b']);
  });

  it('a region with no zones listed is one candidate where EC2 picks the zone', () => {
    const plan = planPlacements({ spec: spec(), history: [], regions: ['eu-west-1'], zonesByRegion: {} });
    expect(plan).toEqual([{ region: 'eu-west-1', zone: null, instanceTypes: expect.any(Array) }]);
  });

  it('every candidate carries the same instance types', () => {
    const plan = planPlacements({ spec: spec({ accelerators: [gpu('A100', 8)] }), history: [], regions: REGIONS, zonesByRegion: ZONES });
    expect(new Set(plan.map((candidate) => candidate.instanceTypes.join()))).toEqual(new Set(['p4d.24xlarge']));
  });

  it.each([
    ['a region relaunch does not launch in', spec({ region: 'eu-central-1' }), /resources\.region: eu-central-1 is not one of the regions .*us-east-1, us-west-2/],
    ['a zone without a subnet', spec({ region: 'us-east-1', zone: 'us-east-1f' }), /resources\.zone: us-east-1f has no subnet .*us-east-1a, us-east-1b/],
    ['a zone of another region', spec({ zone: 'eu-west-1a' }), /resources\.zone: eu-west-1a is in none of the regions/],
  ])('refuses %s with a PrecheckError', (_name, taskSpec, message) => {
    expect(() => places({ spec: taskSpec })).toThrow(PrecheckError);
    expect(() => places({ spec: taskSpec })).toThrow(message);
  });
});

describe('instanceTypesFor', () => {
  it.each([
    ['instance_type is used as given', resources({ instanceType: 'x2idn.32xlarge', cpus: exactly(2) }), ['x2idn.32xlarge']],
    ['T4:1 is every single-T4 g4dn, smallest first', resources({ accelerators: [gpu('T4', 1)] }), ['g4dn.xlarge', 'g4dn.2xlarge', 'g4dn.4xlarge', 'g4dn.8xlarge', 'g4dn.16xlarge']],
    ['T4:4 is the 4-GPU g4dn', resources({ accelerators: [gpu('T4', 4)] }), ['g4dn.12xlarge']],
    ['A10 is an alias of A10G', resources({ accelerators: [gpu('A10', 8)] }), ['g5.48xlarge']],
    ['names are case-insensitive', resources({ accelerators: [gpu('l4', 4)] }), ['g6.12xlarge', 'g6.24xlarge']],
    ['V100:1 is a p3.2xlarge', resources({ accelerators: [gpu('V100', 1)] }), ['p3.2xlarge']],
    ['A100:8 is a p4d', resources({ accelerators: [gpu('A100', 8)] }), ['p4d.24xlarge']],
    ['A100-80GB:8 is a p4de', resources({ accelerators: [gpu('A100-80GB', 8)] }), ['p4de.24xlarge']],
    ['H100:8 is a p5', resources({ accelerators: [gpu('H100', 8)] }), ['p5.48xlarge']],
    ['H200:8 is a p5e or a p5en', resources({ accelerators: [gpu('H200', 8)] }), ['p5e.48xlarge', 'p5en.48xlarge']],
    [
      'a candidate set gives alternatives in the order asked',
      resources({ accelerators: [gpu('H100', 8), gpu('H200', 8)] }),
      ['p5.48xlarge', 'p5e.48xlarge', 'p5en.48xlarge'],
    ],
    ['a candidate with no type is skipped when another fits', resources({ accelerators: [gpu('A100', 3), gpu('A100', 8)] }), ['p4d.24xlarge']],
    ['cpus narrow the GPU types', resources({ accelerators: [gpu('A10G', 1)], cpus: atLeast(16) }), ['g5.4xlarge', 'g5.8xlarge', 'g5.16xlarge']],
    ['memory narrows the GPU types', resources({ accelerators: [gpu('L40S', 1)], memoryGb: exactly(128) }), ['g6e.4xlarge']],
    ['no ask at all is 8+ vCPUs at 4+ GiB each, cheapest first', resources(), expect.arrayContaining(['m6i.2xlarge'])],
    ['cpus 4 exactly, memory unsaid: general purpose or memory-optimized', resources({ cpus: exactly(4) }), ['m6i.xlarge', 'm7i.xlarge', 'r7i.xlarge']],
    ['cpus 4 and memory 8: the compute-optimized type', resources({ cpus: exactly(4), memoryGb: exactly(8) }), ['c7i.xlarge']],
    ['memory 512+ alone', resources({ memoryGb: atLeast(512) }), ['r7i.16xlarge', 'r7i.24xlarge', 'm6i.32xlarge', 'm7i.48xlarge', 'r7i.48xlarge']],
    ['cpus 96+ and memory 384 exactly', resources({ cpus: atLeast(96), memoryGb: exactly(384) }), ['m6i.24xlarge', 'm7i.24xlarge', 'c7i.48xlarge']],
  ])('%s', (_name, asked, expected) => {
    expect(instanceTypesFor(asked)).toEqual(expected);
  });

  it('the default starts with m6i.2xlarge, as SkyPilot does, and never goes below 8 vCPUs or 4 GiB per vCPU', () => {
    const types = instanceTypesFor(resources());
    expect(types[0]).toBe('m6i.2xlarge');
    expect(types).not.toContain('m6i.xlarge');
    expect(types).not.toContain('c7i.2xlarge');
  });

  it('allowed instance types filter the choice', () => {
    expect(instanceTypesFor(resources({ accelerators: [gpu('T4', 1)] }), ['g4dn.2xlarge', 'g5.xlarge'])).toEqual(['g4dn.2xlarge']);
  });

  it.each([
    ['an unknown accelerator, named', resources({ accelerators: [gpu('TPU-v4', 8)] }), /unknown accelerator TPU-v4; relaunch knows T4, A10G, L4/],
    ['an unknown accelerator among known ones', resources({ accelerators: [gpu('A100', 8), gpu('MI300X', 8)] }), /unknown accelerator MI300X/],
    ['a GPU count no type has', resources({ accelerators: [gpu('A100', 3)] }), /no instance type has A100:3; name one with instance_type/],
    ['GPUs with cpus no type has', resources({ accelerators: [gpu('H100', 8)], cpus: exactly(8) }), /no instance type has H100:8 with cpus 8/],
    ['cpus no type has', resources({ cpus: exactly(3) }), /no instance type has cpus 3/],
    ['cpus and memory no type has', resources({ cpus: exactly(2), memoryGb: atLeast(64) }), /no instance type has cpus 2 and memory 64\+ GiB/],
    ['a type outside the allowed list', resources({ instanceType: 'p5.48xlarge' }), /p5.48xlarge is not among the instance types relaunch may launch \(m6i.large\)/],
  ])('refuses %s with a PrecheckError', (_name, asked, message) => {
    const allowed = asked.instanceType === null ? undefined : ['m6i.large'];
    expect(() => instanceTypesFor(asked, allowed)).toThrow(PrecheckError);
    expect(() => instanceTypesFor(asked, allowed)).toThrow(message);
  });
});

describe('instance type facts', () => {
  it.each([
    ['m7g.large', 'arm64'],
    ['c7gn.xlarge', 'arm64'],
    ['r6gd.2xlarge', 'arm64'],
    ['g5g.xlarge', 'arm64'],
    ['a1.large', 'arm64'],
    ['g5.xlarge', 'x86_64'],
    ['g4dn.xlarge', 'x86_64'],
    ['m6i.large', 'x86_64'],
    ['p5e.48xlarge', 'x86_64'],
  ])('%s is %s', (type, arch) => {
    expect(architectureOf(type)).toBe(arch);
  });

  it.each([
    ['g4dn.xlarge', true],
    ['p5.48xlarge', true],
    ['p6-b200.48xlarge', true],
    ['g6f.large', true],
    ['m6i.large', false],
    ['c7gn.xlarge', false],
  ])('%s has GPUs: %s', (type, expected) => {
    expect(hasGpus(type)).toBe(expected);
  });

  it.each([
    ['p4d.24xlarge', true],
    ['p5.48xlarge', true],
    ['g5.12xlarge', true],
    ['g5.xlarge', false],
    ['p3.16xlarge', false],
    ['m6i.large', false],
  ])('%s has EFA: %s', (type, expected) => {
    expect(hasEfa(type)).toBe(expected);
  });
});
