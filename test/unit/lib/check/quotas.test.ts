// EC2's vCPU quota groups and the account-level verdict on each: pure, table-driven.

import { describe, expect, it } from 'vitest';
import { familiesOf, quotaCheck, quotaGroupOf, vcpusInUse, type AllowedInGroup } from '../../../../lib/check/quotas.ts';

describe('quotaGroupOf', () => {
  it.each([
    ['m6i.large', 'standard', 'L-1216C47A', 'L-34B43A08'],
    ['c7i.48xlarge', 'standard', 'L-1216C47A', 'L-34B43A08'],
    ['i4i.xlarge', 'standard', 'L-1216C47A', 'L-34B43A08'],
    ['inf2.xlarge', 'inf', 'L-1945791B', 'L-B5D1601B'],
    ['g5.xlarge', 'g-vt', 'L-DB2E81BA', 'L-3819A6DF'],
    ['vt1.3xlarge', 'g-vt', 'L-DB2E81BA', 'L-3819A6DF'],
    ['p5.48xlarge', 'p', 'L-417A185B', 'L-7212CCBC'],
    ['x2idn.16xlarge', 'x', 'L-7295265B', 'L-E3A00192'],
    ['f1.2xlarge', 'f', 'L-74FC7D96', 'L-88CF9481'],
  ])('%s counts against %s', (type, id, onDemand, spot) => {
    const group = quotaGroupOf(type);
    expect(group?.id).toBe(id);
    expect(group?.codes).toEqual({ 'on-demand': onDemand, spot });
  });

  it.each(['dl1.24xlarge', 'trn1.32xlarge', 'hpc7g.16xlarge', 'u-6tb1.metal', 'mac2.metal', ''])('%s is in none of the groups relaunch knows', (type) => {
    expect(quotaGroupOf(type)).toBeNull();
  });
});

describe('vcpusInUse', () => {
  it('adds the vCPUs of one group and market only, and names types of unknown size', () => {
    const group = quotaGroupOf('g5.xlarge');
    if (group === null) throw new Error('no group');
    const used = vcpusInUse(
      [
        { instanceType: 'g5.xlarge', market: 'spot', vcpus: 4 },
        { instanceType: 'g6.2xlarge', market: 'spot', vcpus: 8 },
        { instanceType: 'g5.xlarge', market: 'on-demand', vcpus: 4 },
        { instanceType: 'm6i.large', market: 'spot', vcpus: 2 },
        { instanceType: 'g9.mystery', market: 'spot', vcpus: null },
      ],
      group,
      'spot',
    );
    expect(used).toEqual({ vcpus: 12, unknown: ['g9.mystery'] });
  });
});

describe('familiesOf', () => {
  it('names each family once, alphabetically, whatever the sizes', () => {
    expect(familiesOf([{ instanceType: 'p5.4xlarge' }, { instanceType: 'p3dn.24xlarge' }, { instanceType: 'p3.2xlarge' }, { instanceType: 'p5.48xlarge' }])).toBe('p3, p3dn, p5');
  });
});

describe('quotaCheck', () => {
  const gpu = quotaGroupOf('g5.xlarge');
  if (gpu === null) throw new Error('no group');
  const allowed = (explicit: boolean): AllowedInGroup => ({
    group: gpu,
    types: [
      { instanceType: 'g5.xlarge', vcpus: 4 },
      { instanceType: 'g6e.12xlarge', vcpus: 48 },
    ],
    explicit,
  });

  it.each([
    ['a zero quota for named types fails', true, { limit: 0, used: 0 }, 'fail', '--quota-code L-3819A6DF --desired-value 48'],
    ['a zero quota for the catalog only warns', false, { limit: 0, used: 0 }, 'warn', '--quota-code L-3819A6DF --desired-value 48'],
    ['a quota used up past the smallest type warns', true, { limit: 16, used: 14 }, 'warn', '--desired-value 62'],
    ['a quota with room for the smallest type is ok', true, { limit: 16, used: 12 }, 'ok', undefined],
    ['no such quota in the region warns', true, { limit: null, used: 0 }, 'warn', undefined],
  ] as const)('%s', (_name, explicit, use, status, fix) => {
    const result = quotaCheck('us-east-1', 'spot', allowed(explicit), use);
    expect(result.id).toBe('quota:us-east-1:g-vt:spot');
    expect(result.status).toBe(status);
    expect(result.message).toContain('G and VT spot vCPUs in us-east-1 (L-3819A6DF, for g5, g6e)');
    if (fix === undefined) expect(result.fix).toBeUndefined();
    else expect(result.fix).toContain(fix);
  });
});
