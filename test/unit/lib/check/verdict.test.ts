// Judging a task's candidates from facts already read: pure, one row per way a candidate
// launches or does not.

import { describe, expect, it } from 'vitest';
import type { Candidate } from '../../../../lib/candidates.ts';
import type { DeploymentRegion } from '../../../../lib/check/deployment.ts';
import { judgeCandidate, launchCheck, type CandidateInput, type ImageOutcome, type Known, type RegionFacts } from '../../../../lib/check/verdict.ts';
import type { QuotaUse } from '../../../../lib/check/quotas.ts';

const HOME: DeploymentRegion = { region: 'us-east-1', subnetsByZone: { 'us-east-1a': 'subnet-a', 'us-east-1b': 'subnet-b' } };
const AWAY: DeploymentRegion = { region: 'us-west-2', subnetsByZone: { 'us-west-2a': 'subnet-c' } };
const g5: Candidate = { instanceType: 'g5.xlarge', vcpus: 4, memoryGib: 16, gpus: { name: 'A10G', count: 1 }, market: 'spot' };

const known = <T>(value: T): Known<T> => ({ known: true, value });
const unknown = (why: string) => ({ known: false as const, why });

/** Facts where everything lets g5.xlarge launch in us-east-1a; `change` overrides. */
function facts(change: Partial<{ offered: Known<ReadonlyMap<string, readonly string[]>>; quota: Known<QuotaUse>; image: Known<ImageOutcome> }> = {}): RegionFacts {
  return {
    offerings: change.offered ?? known(new Map([['g5.xlarge', ['us-east-1a']]])),
    quota: () => change.quota ?? known({ limit: 64, used: 0 }),
    image: () => change.image ?? known({ imageId: 'ami-1' }),
  };
}

function input(overrides: Partial<CandidateInput> = {}, byRegion: Record<string, RegionFacts> = { 'us-east-1': facts() }): CandidateInput {
  return {
    candidate: g5,
    nodes: 1,
    vcpus: 4,
    allowedInstanceTypes: null,
    regions: [HOME],
    facts: (region) => byRegion[region] ?? facts({ offered: unknown('not read') }),
    ...overrides,
  };
}

describe('judgeCandidate', () => {
  it('launches where the type is offered, the quota has room and the image resolves', () => {
    const { verdict, fix } = judgeCandidate(input());
    expect(verdict).toEqual({ instanceType: 'g5.xlarge', market: 'spot', vcpus: 4, nodes: 1, launchable: true, places: [{ region: 'us-east-1', zones: ['us-east-1a'] }], reasons: [] });
    expect(fix).toBeNull();
  });

  it.each([
    ['a type offered in no configured zone', {}, { 'us-east-1': facts({ offered: known(new Map()) }) }, 'us-east-1: g5.xlarge is not offered in us-east-1a, us-east-1b', 'describe-instance-type-offerings'],
    ['a quota without room for every node', { nodes: 4 }, { 'us-east-1': facts({ quota: known({ limit: 16, used: 4 }) }) }, 'needs 16 G and VT spot vCPUs (4 x 4), 12 free (quota L-3819A6DF: 16, 4 in use)', '--quota-code L-3819A6DF --desired-value 20'],
    ['a zero quota', {}, { 'us-east-1': facts({ quota: known({ limit: 0, used: 0 }) }) }, '0 free (quota L-3819A6DF: 0, 0 in use)', '--desired-value 4'],
    ['an image that does not resolve', {}, { 'us-east-1': facts({ image: known({ problem: 'resources.image_id: ami-9 is not an AMI this account can use in us-east-1' }) }) }, 'ami-9 is not an AMI', 'resources.image_id'],
    ['a type the deployment does not allow', { allowedInstanceTypes: ['m6i.large'] }, {}, 'g5.xlarge is not among relaunch:allowedInstanceTypes (m6i.large)', 'add g5.xlarge to relaunch:allowedInstanceTypes'],
    ['a region the deployment does not launch in', { candidate: { ...g5, region: 'eu-west-1' } }, {}, 'the task asks for eu-west-1, where relaunch does not launch (us-east-1)', 'relaunch:otherRegions'],
    ['a zone with no subnet', { candidate: { ...g5, region: 'us-east-1', zone: 'us-east-1f' } }, {}, 'us-east-1: the task asks for us-east-1f, which has no subnet in relaunch:subnets', 'add a subnet of us-east-1f'],
  ] as const)('does not launch with %s', (_name, overrides, byRegion, reason, fix) => {
    const judged = judgeCandidate(input(overrides as Partial<CandidateInput>, byRegion as Record<string, RegionFacts>));
    expect(judged.verdict.launchable).toBe(false);
    expect(judged.verdict.places).toEqual([]);
    expect(judged.verdict.reasons.join('\n')).toContain(reason);
    expect(judged.fix).toContain(fix);
  });

  it.each([
    ['offerings could not be read', facts({ offered: unknown('these credentials may not call ec2:DescribeInstanceTypeOfferings') }), 'offerings of g5.xlarge not checked: these credentials may not call ec2:DescribeInstanceTypeOfferings'],
    ['the quota could not be read', facts({ quota: unknown('these credentials may not call servicequotas:GetServiceQuota') }), 'quota L-3819A6DF not checked: these credentials may not call servicequotas:GetServiceQuota'],
    ['the region has no such quota', facts({ quota: known({ limit: null, used: 0 }) }), 'Service Quotas has no quota L-3819A6DF here'],
  ])('is unknown (null) when %s', (_name, regionFacts, reason) => {
    const { verdict } = judgeCandidate(input({}, { 'us-east-1': regionFacts }));
    expect(verdict.launchable).toBeNull();
    expect(verdict.reasons).toContain(`us-east-1: ${reason}`);
  });

  it('is unknown for a family whose quota relaunch does not know', () => {
    const { verdict } = judgeCandidate(input({ candidate: { ...g5, instanceType: 'dl1.24xlarge', vcpus: null }, vcpus: 96 }, { 'us-east-1': facts({ offered: known(new Map([['dl1.24xlarge', ['us-east-1a']]])) }) }));
    expect(verdict.launchable).toBeNull();
    expect(verdict.reasons).toContain('us-east-1: relaunch does not know which vCPU quota limits dl1');
  });

  it('launches in a failover region when home cannot, saying why home cannot', () => {
    const { verdict } = judgeCandidate(
      input({ regions: [HOME, AWAY] }, { 'us-east-1': facts({ quota: known({ limit: 0, used: 0 }) }), 'us-west-2': facts({ offered: known(new Map([['g5.xlarge', ['us-west-2a']]])) }) }),
    );
    expect(verdict.launchable).toBe(true);
    expect(verdict.places).toEqual([{ region: 'us-west-2', zones: ['us-west-2a'] }]);
    expect(verdict.reasons).toHaveLength(1);
    expect(verdict.reasons[0]).toMatch(/^us-east-1: needs 4/);
  });

  it('judges every zone of the region where no subnets are known yet (nothing deployed, no cdk.json)', () => {
    const bare = { region: 'us-east-1', subnetsByZone: {} };
    const offered = facts({ offered: known(new Map([['g5.xlarge', ['us-east-1a', 'us-east-1c']]])) });
    expect(judgeCandidate(input({ regions: [bare] }, { 'us-east-1': offered })).verdict).toMatchObject({ launchable: true, places: [{ region: 'us-east-1', zones: ['us-east-1a', 'us-east-1c'] }] });
    const none = judgeCandidate(input({ regions: [bare] }, { 'us-east-1': facts({ offered: known(new Map()) }) })).verdict;
    expect(none.reasons).toEqual(['us-east-1: g5.xlarge is not offered in any zone of us-east-1']);
  });

  it('names the pipeline task a candidate belongs to', () => {
    expect(judgeCandidate(input({ task: 2 })).verdict.task).toBe(2);
  });
});

describe('launchCheck', () => {
  const ok = judgeCandidate(input());
  const refused = judgeCandidate(input({}, { 'us-east-1': facts({ quota: known({ limit: 0, used: 0 }) }) }));
  const unread = judgeCandidate(input({}, { 'us-east-1': facts({ offered: unknown('denied') }) }));

  it('is ok naming the first launchable candidate and where', () => {
    expect(launchCheck('launch', [refused, ok, ok])).toEqual({ id: 'launch', status: 'ok', message: 'would launch now: g5.xlarge spot in us-east-1 (us-east-1a), and 1 more candidate' });
  });

  it('fails with the first fix when every candidate is refused', () => {
    const check = launchCheck('launch', [refused]);
    expect(check.status).toBe('fail');
    expect(check.message).toContain('would not launch now: none of 1 candidate can (first: g5.xlarge: us-east-1: needs 4');
    expect(check.fix).toContain('request-service-quota-increase');
  });

  it('warns when none is known to launch and some could not be checked', () => {
    expect(launchCheck('launch', [refused, unread])).toMatchObject({ status: 'warn', message: expect.stringContaining('1 of 2 could not be checked') });
  });

  it('fails a task with no candidate at all', () => {
    expect(launchCheck('launch:task-1', [])).toMatchObject({ id: 'launch:task-1', status: 'fail', fix: 'relaunch validate TASK.yaml' });
  });
});
