// The report body's setup duration: optional (an agent from before it still reports), a
// whole number of ms within bounds, and only on a setup that exited.

import { describe, expect, it } from 'vitest';
import { ReportBodySchema, SETUP_MS_MAX } from '../../../../lib/agent/protocol.ts';

const setup = { nodeRank: 0, phase: 'setup', exitCode: 0, outputTail: '' } as const;

/** The issues of a body the schema refuses, as `path: message`. */
function issues(body: unknown): string[] {
  const parsed = ReportBodySchema.safeParse(body);
  if (parsed.success) throw new Error(`expected ${JSON.stringify(body)} to be refused`);
  return parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`);
}

describe('ReportBodySchema setupMs', () => {
  it("takes a setup report with how long setup itself ran, 0 for a skipped setup, and one without it (an older agent's)", () => {
    expect(ReportBodySchema.parse({ ...setup, setupMs: 41_250 })).toEqual({ ...setup, setupMs: 41_250 });
    expect(ReportBodySchema.parse({ ...setup, exitCode: 3, setupMs: 0 })).toEqual({ ...setup, exitCode: 3, setupMs: 0 });
    expect(ReportBodySchema.parse({ ...setup, setupMs: SETUP_MS_MAX }).setupMs).toBe(SETUP_MS_MAX);
    // Past the bound (a clock that jumped) the report is still taken, its figure as the bound:
    // the exit code it carries must not be refused over a timing figure.
    expect(ReportBodySchema.parse({ ...setup, setupMs: SETUP_MS_MAX + 1 }).setupMs).toBe(SETUP_MS_MAX);
    expect(ReportBodySchema.parse(setup)).toEqual(setup);
  });

  it.each<[string, unknown]>([
    ['negative', -1],
    ['a fraction', 12.5],
    ['huge', 1e300],
    ['a string', '41250'],
    ['null', null],
    ['an object', { ms: 1 }],
  ])('refuses a setupMs that is %s, naming the field and what it expects', (_name, setupMs) => {
    const said = issues({ ...setup, setupMs });
    expect(said.length).toBeGreaterThan(0);
    for (const issue of said) expect(issue).toMatch(/^setupMs: expected /);
  });

  it('refuses a setupMs on a run report, a stopped phase or an agent failure: only a setup that exited ran for a known time', () => {
    expect(issues({ ...setup, phase: 'run', setupMs: 5 })).toEqual(['setupMs: expected setupMs only on a setup report with its exit code, got it on run']);
    expect(issues({ nodeRank: 0, phase: 'setup', stopped: 'interruption', outputTail: '', setupMs: 5 })).toEqual([
      'setupMs: expected setupMs only on a setup report with its exit code, got it with stopped',
    ]);
    expect(issues({ nodeRank: 0, phase: 'setup', agentFailure: { step: 'image-pull', error: 'x' }, outputTail: '', setupMs: 5 })).toEqual([
      'setupMs: expected setupMs only on a setup report with its exit code, got it with agentFailure',
    ]);
  });
});
