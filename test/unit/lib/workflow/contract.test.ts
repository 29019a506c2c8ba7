// The decision the state machine's Choice reads (DecisionOutputSchema): its status is one of
// the job's statuses, typed as one, so no reader of `$.decision` casts it.

import { describe, expect, expectTypeOf, it } from 'vitest';
import { RecoveryAction } from '../../../../lib/policy/types.ts';
import { isTerminal, JobStatus } from '../../../../lib/status.ts';
import { DecisionOutputSchema, type DecisionOutput } from '../../../../lib/workflow/contract.ts';

const decision = { action: RecoveryAction.FAIL, status: 'FAILED', reason: 'exit code 1; no restarts left', delaySeconds: 0, continueAsNew: false };

describe('the decision at $.decision', () => {
  it('parses to a status typed as a JobStatus, usable where one is expected with no cast', () => {
    const parsed = DecisionOutputSchema.parse(decision);
    expectTypeOf(parsed.status).toEqualTypeOf<JobStatus>();
    expectTypeOf<DecisionOutput['status']>().toEqualTypeOf<JobStatus>();
    const status: JobStatus = parsed.status;
    expect(isTerminal(status)).toBe(true);
  });

  it.each(Object.values(JobStatus))('takes the status %s', (status) => {
    expect(DecisionOutputSchema.parse({ ...decision, status }).status).toBe(status);
  });

  it('refuses a status that is not a job status, naming the field and the statuses expected', () => {
    const result = DecisionOutputSchema.safeParse({ ...decision, status: 'DONE' });
    expect(result.success).toBe(false);
    expect(result.error?.issues).toEqual([expect.objectContaining({ path: ['status'], message: expect.stringContaining('"PENDING"') })]);
  });
});
