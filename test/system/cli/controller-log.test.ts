// The controller's timeline of a job (`relaunch logs JOB --controller`): every launch, end and
// decision, and the status changes where they can be read, in the order they happened.

import { describe, expect, it } from 'vitest';
import { controllerTimeline, formatTimeline } from '../../../cli/controller-log.ts';
import type { JobEvent } from '../../../lib/model.ts';
import type { AttemptView, JobView } from '../../../lib/views.ts';

const T = (seconds: number): string => new Date(Date.UTC(2026, 11, 6, 12, 0, seconds)).toISOString();

function attempt(overrides: Partial<AttemptView> & Pick<AttemptView, 'attempt'>): AttemptView {
  return {
    outcome: null,
    phase: null,
    exitCodes: [],
    decision: null,
    reason: null,
    rule: null,
    delaySeconds: null,
    countersAfter: null,
    outputTails: [],
    agentFailure: null,
    market: 'spot',
    placement: { region: 'us-east-1', zone: 'us-east-1b', instanceType: 'g5.xlarge' },
    startedAt: T(0),
    endedAt: null,
    decidedAt: null,
    runStartedAt: null,
    gapSeconds: null,
    standby: null,
    instances: [],
    ...overrides,
  };
}

function job(attempts: AttemptView[]): JobView {
  return { attempts } as unknown as JobView;
}

function event(at: string, from: JobEvent['from'], to: JobEvent['to'], reason: string, attemptNumber: number | null = 1): JobEvent {
  return { jobId: 'j-1', at, from, to, attempt: attemptNumber, reason };
}

describe('controllerTimeline', () => {
  const preempted = attempt({
    attempt: 1,
    outcome: 'PREEMPTED',
    phase: 'run',
    exitCodes: [null, 0],
    decision: 'RECOVER',
    rule: 'PREEMPTED_OR_LOST',
    reason: 'spot preemption; recovery 1, does not count toward max_restarts_on_errors',
    delaySeconds: 30,
    startedAt: T(1),
    runStartedAt: T(5),
    endedAt: T(9),
    decidedAt: T(10),
  });
  const running = attempt({ attempt: 2, market: 'on-demand', placement: null, startedAt: T(40) });

  it('puts each attempt and each status change in time order, a decision before the status it wrote', () => {
    const events = [
      event(T(0), null, 'PENDING', 'job created', null),
      event(T(10), 'RUNNING', 'RECOVERING', 'spot preemption; recovery 1, does not count toward max_restarts_on_errors'),
      event(T(2), 'STARTING', 'RUNNING', 'the agent of attempt 1 is up'),
    ];
    expect(formatTimeline(controllerTimeline(job([running, preempted]), events), 'Europe/Paris').split('\n')).toEqual([
      `2026-12-06 13:00:00 CET  status new -> PENDING: job created`,
      `2026-12-06 13:00:01 CET  attempt 1 launched, spot, g5.xlarge in us-east-1b`,
      `2026-12-06 13:00:02 CET  status STARTING -> RUNNING (attempt 1): the agent of attempt 1 is up`,
      `2026-12-06 13:00:05 CET  attempt 1: run started`,
      `2026-12-06 13:00:09 CET  attempt 1 ended PREEMPTED in run, exit codes unknown,0`,
      `2026-12-06 13:00:10 CET  attempt 1 decided RECOVER (PREEMPTED_OR_LOST): spot preemption; recovery 1, does not count toward max_restarts_on_errors; next launch in 30 s`,
      `2026-12-06 13:00:10 CET  status RUNNING -> RECOVERING (attempt 1): spot preemption; recovery 1, does not count toward max_restarts_on_errors`,
      `2026-12-06 13:00:40 CET  attempt 2 launched, on-demand`,
    ]);
  });

  it("names a standby's warning, a standby let go unused, and an agent's failure", () => {
    const standby = attempt({
      attempt: 3,
      startedAt: T(1),
      endedAt: T(20),
      standby: { for: 2, on: 'interruption', state: 'released', adoptedAt: null, releasedAt: T(20), releaseReason: 'not needed: attempt 2 was decided SUCCEED', beside: null },
    });
    const failed = attempt({
      attempt: 1,
      outcome: 'AGENT_FAILED',
      phase: 'setup',
      startedAt: T(0),
      endedAt: T(3),
      agentFailure: { nodeRank: 0, step: 'image-pull', error: 'toomanyrequests' },
    });
    expect(controllerTimeline(job([failed, standby]), null).map((entry) => entry.text)).toEqual([
      'attempt 1 launched, spot, g5.xlarge in us-east-1b',
      'attempt 3 launched as the standby of attempt 2 (interruption warning), spot, g5.xlarge in us-east-1b',
      "attempt 1 ended AGENT_FAILED in setup; node 0's agent failed at image-pull: toomanyrequests",
      'attempt 3 ended released unused',
    ]);
  });
});
