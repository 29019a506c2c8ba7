// planFleets and resourceChoices: the EC2 Fleet requests an attempt sends, in order.

import { describe, expect, it } from 'vitest';
import { PrecheckError } from '../../../lib/errors.ts';
import { MAX_FLEET_OVERRIDES, planFleets, resourceChoices, type FleetPlan } from '../../../lib/launch-plan.ts';
import type { Market } from '../../../lib/policy/types.ts';
import type { LaunchRequest } from '../../../lib/ports.ts';
import type { RecoveryStrategy, ResourceAlternatives, Resources } from '../../../lib/task-file/types.ts';
import { resources, taskSpec } from '../../support/fixtures/specs.ts';

const REGIONS = ['us-east-1', 'us-west-2'];
const ZONES = { 'us-east-1': ['us-east-1a', 'us-east-1b'], 'us-west-2': ['us-west-2a'] };
const A100 = { name: 'A100', count: 8 };
const T4 = { name: 'T4', count: 1 };

function fleets(
  given: Partial<Resources>,
  market: Market = 'on-demand',
  history: LaunchRequest['history'] = [],
  strategy: RecoveryStrategy = 'EAGER_NEXT_REGION',
): FleetPlan[] {
  const base = resources(given);
  const spec = taskSpec({ resources: { ...base, jobRecovery: { ...base.jobRecovery, strategy } } });
  return planFleets({ spec, history, regions: REGIONS, zonesByRegion: ZONES, market });
}

/** A fleet as `region market: zone/type, ...`, short enough to read in a table. */
function brief(plan: FleetPlan): string {
  const overrides = plan.overrides.map(({ zone, instanceType }) => `${zone ?? '*'}/${instanceType}`).join(' ');
  return `${plan.region} ${plan.market}${plan.prioritized ? ' prioritized' : ''}: ${overrides}`;
}

const anyOf = (...options: ResourceAlternatives['options']): ResourceAlternatives => ({ mode: 'any_of', options });
const ordered = (...options: ResourceAlternatives['options']): ResourceAlternatives => ({ mode: 'ordered', options });

describe('planFleets', () => {
  it('one request per region over every zone and fitting type, in configured order', () => {
    expect(fleets({ accelerators: [A100] }).map(brief)).toEqual([
      'us-east-1 on-demand: us-east-1a/p4d.24xlarge us-east-1b/p4d.24xlarge',
      'us-west-2 on-demand: us-west-2a/p4d.24xlarge',
    ]);
  });

  it('asks for a type relaunch does not know in a request of its own, after the known ones', () => {
    const plan = fleets({ region: 'us-east-1', alternatives: anyOf({ instanceType: 'zz9.huge' }, { instanceType: 'm6i.large' }) });
    expect(plan.map(brief)).toEqual(['us-east-1 on-demand: us-east-1a/m6i.large us-east-1b/m6i.large', 'us-east-1 on-demand: us-east-1a/zz9.huge us-east-1b/zz9.huge']);
  });

  it('an accelerator set is one request over every type of every accelerator', () => {
    const [first] = fleets({ accelerators: [A100, { name: 'H100', count: 8 }], region: 'us-west-2' }, 'spot');
    expect(first && brief(first)).toBe('us-west-2 spot: us-west-2a/p4d.24xlarge us-west-2a/p5.48xlarge');
  });

  it('any_of: spot entries first, each entry its own market, on-demand entries in their own request', () => {
    const plan = fleets({ instanceType: 'g5.xlarge', useSpot: true, alternatives: anyOf({ useSpot: false }, { useSpot: true }) }, 'spot');
    expect(plan.map(brief)).toEqual([
      'us-east-1 spot: us-east-1a/g5.xlarge us-east-1b/g5.xlarge',
      'us-east-1 on-demand: us-east-1a/g5.xlarge us-east-1b/g5.xlarge',
      'us-west-2 spot: us-west-2a/g5.xlarge',
      'us-west-2 on-demand: us-west-2a/g5.xlarge',
    ]);
  });

  it('the on-demand market (after on_demand_fallback_after) makes every entry on-demand, once', () => {
    const plan = fleets({ instanceType: 'g5.xlarge', useSpot: true, alternatives: anyOf({ useSpot: true }, { useSpot: false }) }, 'on-demand');
    expect(plan.map(brief)).toEqual([
      'us-east-1 on-demand: us-east-1a/g5.xlarge us-east-1b/g5.xlarge',
      'us-west-2 on-demand: us-west-2a/g5.xlarge',
    ]);
  });

  it('any_of entries placed in different regions each go to their own region', () => {
    const plan = fleets({ alternatives: anyOf({ region: 'us-west-2', zone: null, accelerators: [T4] }, { zone: 'us-east-1b', region: 'us-east-1', instanceType: 'm6i.large' }) });
    expect(plan.map(brief)).toEqual(['us-east-1 on-demand: us-east-1b/m6i.large', expect.stringMatching(/^us-west-2 on-demand: us-west-2a\/g4dn\.xlarge /)]);
  });

  it('ordered: prioritized, requests by the earliest entry they hold, entries in order within one', () => {
    const plan = fleets({ alternatives: ordered({ region: 'us-west-2', zone: null, instanceType: 'p4d.24xlarge' }, { instanceType: 'g5.xlarge' }) });
    expect(plan.map(brief)).toEqual([
      'us-west-2 on-demand prioritized: us-west-2a/p4d.24xlarge us-west-2a/g5.xlarge',
      'us-east-1 on-demand prioritized: us-east-1a/g5.xlarge us-east-1b/g5.xlarge',
    ]);
  });

  it('EAGER_NEXT_REGION after a preemption: other regions, then the other zone, the zone lost last, each its own request', () => {
    const lost: LaunchRequest['history'] = [{ placement: { region: 'us-east-1', zone: 'us-east-1a', instanceType: 'm6i.large' }, outcome: 'PREEMPTED' }];
    expect(fleets({ instanceType: 'm6i.large' }, 'spot', lost).map(brief)).toEqual([
      'us-west-2 spot: us-west-2a/m6i.large',
      'us-east-1 spot: us-east-1b/m6i.large',
      'us-east-1 spot: us-east-1a/m6i.large',
    ]);
  });

  it('FAILOVER: the zone just used, then its region, then the others', () => {
    const used: LaunchRequest['history'] = [{ placement: { region: 'us-east-1', zone: 'us-east-1b', instanceType: 'm6i.large' }, outcome: 'EXITED' }];
    expect(fleets({ instanceType: 'm6i.large' }, 'on-demand', used, 'FAILOVER').map(brief)).toEqual([
      'us-east-1 on-demand: us-east-1b/m6i.large',
      'us-east-1 on-demand: us-east-1a/m6i.large',
      'us-west-2 on-demand: us-west-2a/m6i.large',
    ]);
  });

  it(`keeps a request to ${MAX_FLEET_OVERRIDES} overrides, the less preferred ones in the next`, () => {
    const base = resources({ cpus: { value: 2, orMore: true } });
    // 27 fitting types in 12 zones: 324 candidates.
    const zones = [...'abcdefghijkl'].map((letter) => `us-east-1${letter}`);
    const spec = taskSpec({ resources: base });
    const plan = planFleets({ spec, history: [], regions: ['us-east-1'], zonesByRegion: { 'us-east-1': zones }, market: 'on-demand' });
    const counts = plan.map((fleet) => fleet.overrides.length);
    expect(counts.every((count) => count <= MAX_FLEET_OVERRIDES)).toBe(true);
    expect(counts).toEqual([300, 24]);
    expect(plan.flatMap((fleet) => fleet.overrides).slice(0, 2)).toEqual([
      { zone: 'us-east-1a', instanceType: 'm6i.large', entry: null },
      { zone: 'us-east-1a', instanceType: 'm7i.large', entry: null },
    ]);
  });

  it('each override names the entry it comes from, by its position in the file', () => {
    const plan = fleets({ alternatives: anyOf({ index: 2, instanceType: 'm6i.large', useSpot: false }, { index: 5, instanceType: 'g5.xlarge', useSpot: false }) });
    expect(plan[0]?.overrides.map((override) => [override.instanceType, override.entry])).toEqual([
      ['m6i.large', 2],
      ['m6i.large', 2],
      ['g5.xlarge', 5],
      ['g5.xlarge', 5],
    ]);
    expect(fleets({ instanceType: 'm6i.large' })[0]?.overrides[0]?.entry).toBeNull();
  });

  it('leaves out an entry that cannot run here, and names each when none can', () => {
    expect(fleets({ alternatives: anyOf({ region: 'eu-west-1', zone: null }, { instanceType: 'm6i.large', region: 'us-west-2', zone: null }) }).map(brief)).toEqual([
      'us-west-2 on-demand: us-west-2a/m6i.large',
    ]);
    const none = () => fleets({ alternatives: anyOf({ region: 'eu-west-1', zone: null }, { accelerators: [{ name: 'TPU', count: 8 }] }) });
    expect(none).toThrow(PrecheckError);
    expect(none).toThrow(/^resources\.any_of\[0\]: resources\.region: eu-west-1 is not one of .*; resources\.any_of\[1\]: resources\.accelerators: unknown accelerator TPU/);
  });
});

describe('resourceChoices', () => {
  it('without alternatives: the resources themselves, on the given market', () => {
    expect(resourceChoices(resources({ cpus: { value: 4, orMore: false } }), 'spot')).toEqual([
      { resources: resources({ cpus: { value: 4, orMore: false } }), market: 'spot', entry: null },
    ]);
  });

  it('an entry naming cpus, memory or accelerators drops the outer instance_type; others keep it', () => {
    const [byAccelerator, plain] = resourceChoices(resources({ instanceType: 'p4d.24xlarge', alternatives: anyOf({ accelerators: [T4] }, { useSpot: false }) }), 'on-demand');
    expect(byAccelerator?.resources).toMatchObject({ instanceType: null, accelerators: [T4] });
    expect(plain?.resources).toMatchObject({ instanceType: 'p4d.24xlarge' });
    expect(plain?.resources).not.toHaveProperty('alternatives');
  });
});
