// The stack's own cost (scripts/stack-cost.ts) against the shipped app's synthesized
// templates: docs/aws.md says what they cost, a new alarm changes the figure, and the
// per-job counts come from the template's own state machine walked for one attempt.

import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { PRICES } from '../../../bench/scale/limits.ts';
import {
  BEGIN_MARK,
  COST_DOC,
  definitionOf,
  END_MARK,
  jobCounts,
  renderCost,
  stackCost,
  synthesizedTemplates,
  withCost,
  type CfnTemplate,
  type JobCounts,
} from '../../../scripts/stack-cost.ts';

let templates: CfnTemplate[];
let counts: { job: JobCounts; hour: JobCounts };

beforeAll(async () => {
  templates = synthesizedTemplates();
  counts = await jobCounts(definitionOf(templates));
}, 120_000);

const totalOf = (lines: readonly { dollars: number }[]) => lines.reduce((sum, line) => sum + line.dollars, 0);

describe("the stack's cost", () => {
  it('is what docs/aws.md says (else: node --import tsx scripts/stack-cost.ts --write)', () => {
    const page = readFileSync(COST_DOC, 'utf8');
    const written = page.slice(page.indexOf(BEGIN_MARK), page.indexOf(END_MARK) + END_MARK.length);
    expect(written, 'docs/aws.md disagrees with the templates: run node --import tsx scripts/stack-cost.ts --write').toBe(renderCost(stackCost(templates, counts)));
  });

  it('counts every alarm of the templates: one more is $0.10 more a month', () => {
    const before = stackCost(templates, counts);
    const [first, ...rest] = templates as [CfnTemplate, ...CfnTemplate[]];
    const more: CfnTemplate = { Resources: { ...first.Resources, AnotherAlarm: { Type: 'AWS::CloudWatch::Alarm', Properties: { Period: 300 } } } };
    const after = stackCost([more, ...rest], counts);
    expect(totalOf(after.idle) - totalOf(before.idle)).toBeCloseTo(PRICES.cloudWatchAlarmMonth, 10);
    expect(renderCost(after)).not.toBe(renderCost(before));
  });

  it("prices a function's memory as the template sets it", () => {
    const doubled = templates.map((template) => ({
      Resources: Object.fromEntries(
        Object.entries(template.Resources).map(([id, resource]) => [id, resource.Type === 'AWS::Lambda::Function' ? { ...resource, Properties: { ...resource.Properties, MemorySize: Number(resource.Properties?.MemorySize) * 2 } } : resource]),
      ),
    }));
    const line = (cost: ReturnType<typeof stackCost>) => cost.perJob.find((entry) => entry.item === 'Lambda duration')?.dollars ?? Number.NaN;
    expect(line(stackCost(doubled, counts))).toBeCloseTo(2 * line(stackCost(templates, counts)), 12);
  });

  it('walks the shipped definition once through for a job that succeeds on its first attempt', async () => {
    expect(counts.job.executions).toBe(1);
    // LaunchAttempt, AwaitOrEvaluate, AwaitBoot, AwaitAttempt, EvaluateRecoveryPolicy, ReleaseInstances, RelaunchOrFinish, JobSucceeded.
    expect(counts.job.transitions).toBe(8);
    expect(counts.hour.transitions).toBe(0);
    expect(counts.hour.apiRequests).toBeGreaterThan(0);
  });

  it('refuses a page without the block, naming the marks', () => {
    expect(() => withCost('# no block here\n', 'x')).toThrow(BEGIN_MARK);
  });
});
