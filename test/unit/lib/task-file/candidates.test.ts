// any_of, ordered, ports and network_tier: what each form of the file normalizes to.

import { describe, expect, it } from 'vitest';
import { parseTaskFile } from '../../../../lib/task-file/parse.ts';
import { formatPortRange, mergePortRanges, portsWithin } from '../../../../lib/task-file/network-ports.ts';
import { rejectedIssues } from '../../../support/task-file-rejection.ts';
import type { Resources } from '../../../../lib/task-file/types.ts';

function resourcesOf(yaml: string): Resources {
  return parseTaskFile(`resources:\n${yaml}run: echo hi\n`).spec.resources;
}

describe('any_of and ordered', () => {
  it.each<[string, string, Partial<Resources>]>([
    [
      'any_of keeps the AWS entries and drops the others',
      '  use_spot: true\n  accelerators: {A100:1, T4:1}\n  any_of:\n    - cloud: aws\n    - cloud: gcp\n',
      { useSpot: true, alternatives: { mode: 'any_of', options: [{ useSpot: true }] } },
    ],
    [
      'an entry placing itself replaces region and zone together; infra counts as placing',
      '  any_of:\n    - infra: aws/us-east-1/us-east-1b\n    - region: us-west-2\n    - accelerators: T4:4\n',
      {
        alternatives: {
          mode: 'any_of',
          options: [
            { region: 'us-east-1', zone: 'us-east-1b', useSpot: false },
            { region: 'us-west-2', zone: null, useSpot: false },
            { accelerators: [{ name: 'T4', count: 4 }], useSpot: false },
          ],
        },
      },
    ],
    [
      'use_spot inside any_of mixes markets: the task may use spot',
      '  any_of:\n    - use_spot: true\n    - use_spot: false\n',
      { useSpot: true, alternatives: { mode: 'any_of', options: [{ useSpot: true }, { useSpot: false }] } },
    ],
    [
      'entries that all turn spot off leave an outer use_spot unused',
      '  use_spot: true\n  any_of:\n    - {use_spot: false, cpus: 4}\n',
      { useSpot: false, alternatives: { mode: 'any_of', options: [{ useSpot: false, cpus: { value: 4, orMore: false } }] } },
    ],
    [
      'ordered keeps its order and every machine field; an entry without use_spot takes the outer one',
      '  use_spot: true\n  ordered:\n    - instance_type: p4d.24xlarge\n    - {cpus: 8+, memory: 64+, use_spot: false}\n',
      {
        alternatives: {
          mode: 'ordered',
          options: [
            { instanceType: 'p4d.24xlarge', useSpot: true },
            { cpus: { value: 8, orMore: true }, memoryGb: { value: 64, orMore: true }, useSpot: false },
          ],
        },
      },
    ],
  ])('%s', (_name, yaml, expected) => {
    expect(resourcesOf(yaml)).toMatchObject(expected);
  });

  it('warns about each entry left out for another cloud, by path and line', () => {
    const parsed = parseTaskFile('resources:\n  any_of:\n    - cloud: aws\n    - cloud: gcp\n      accelerators: TPU:8\n    - infra: k8s/ctx\nrun: x\n');
    expect(parsed.warnings).toEqual([
      { path: 'resources.any_of[1]', line: 4, message: 'left out: it is for gcp, and relaunch runs on AWS only (the AWS entries remain)' },
      { path: 'resources.any_of[2]', line: 6, message: 'left out: it is for k8s, and relaunch runs on AWS only (the AWS entries remain)' },
    ]);
  });

  it('each entry keeps its position in the file, entries for other clouds left out', () => {
    const { alternatives } = resourcesOf('  any_of:\n    - cloud: gcp\n    - cpus: 4\n    - cloud: AWS\n');
    expect(alternatives).toEqual({
      mode: 'any_of',
      options: [
        { index: 1, cpus: { value: 4, orMore: false }, useSpot: false },
        { index: 2, useSpot: false },
      ],
    });
  });

  it('leaves the shape of a task without candidates as it was', () => {
    const resources = resourcesOf('  cpus: 4\n');
    expect(resources).not.toHaveProperty('alternatives');
    expect(resources).not.toHaveProperty('ports');
    expect(resources).not.toHaveProperty('networkTier');
  });
});

describe('ports and network_tier', () => {
  it.each<[string, string, Resources['ports']]>([
    ['one port', '8080', [{ from: 8080, to: 8080 }]],
    ['a range string', '"8080-8090"', [{ from: 8080, to: 8090 }]],
    ['a port as a string', '"22"', [{ from: 22, to: 22 }]],
    ['a list, merged and sorted', '[9000, "8080-8085", 8086, 8081]', [{ from: 8080, to: 8086 }, { from: 9000, to: 9000 }]],
  ])('%s', (_name, value, expected) => {
    expect(resourcesOf(`  ports: ${value}\n`).ports).toEqual(expected);
  });

  it.each([
    ['best', 'best'],
    ['BEST', 'best'],
    ['standard', 'standard'],
  ])('network_tier %s is %s', (value, expected) => {
    expect(resourcesOf(`  network_tier: ${value}\n`).networkTier).toBe(expected);
  });
});

describe('rejected candidates, ports and network tiers', () => {
  it.each([
    [
      'any_of and ordered together, though each is valid',
      '  any_of: [{cpus: 4}]\n  ordered: [{cpus: 8}]\n',
      ['resources.ordered: expected any_of or ordered, got both (line 3)'],
    ],
    [
      'a key of another section inside an ordered entry',
      '  ordered:\n    - {cpus: 4, run: x}\n',
      ['resources.ordered[0].run: unknown key here, did you mean `run`? (line 3)'],
    ],
    ['an empty any_of', '  any_of: []\n', ['resources.any_of: expected a list of resources mappings, such as [{accelerators: A100:8}, {use_spot: false}], got an empty list (line 2)']],
    ['ports given as true', '  ports: true\n', ['resources.ports: expected a port 1-65535 such as 8080, or a range such as "8080-8090", got true (line 2)']],
    ['ports given as a word', '  ports: http\n', ['resources.ports: expected a port 1-65535 such as 8080, or a range such as "8080-8090", got "http" (line 2)']],
    ['a network tier that is not a word', '  network_tier: 3\n', ['resources.network_tier: expected standard or best (best: EFA on instance types that have it), got 3 (line 2)']],
  ])('%s', (_name, yaml, expected) => {
    expect(rejectedIssues(() => parseTaskFile(`resources:\n${yaml}run: echo hi\n`))).toEqual(expected);
  });
});

describe('port ranges', () => {
  it('formats one port as itself and a range with a dash', () => {
    expect([{ from: 22, to: 22 }, { from: 8080, to: 8090 }].map(formatPortRange)).toEqual(['22', '8080-8090']);
  });

  it('joins overlapping and touching ranges, keeps gaps', () => {
    expect(mergePortRanges([{ from: 10, to: 20 }, { from: 1, to: 5 }, { from: 21, to: 22 }, { from: 15, to: 18 }, { from: 30, to: 30 }])).toEqual([
      { from: 1, to: 5 },
      { from: 10, to: 22 },
      { from: 30, to: 30 },
    ]);
  });

  it.each([
    [[{ from: 8080, to: 8085 }], true],
    [[{ from: 8080, to: 8080 }, { from: 9000, to: 9000 }], true],
    [[{ from: 8085, to: 8095 }], false],
    [[{ from: 7000, to: 7000 }], false],
  ])('%j within 8000-8090 and 9000: %s', (wanted, expected) => {
    expect(portsWithin(wanted, [{ from: 8000, to: 8090 }, { from: 9000, to: 9000 }])).toBe(expected);
  });
});
