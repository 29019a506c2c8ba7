// A job told to stop, through the local runtime and the real agent: on a cancel and on a
// chaos spot preemption, a job that traps SIGTERM to save a checkpoint gets its grace
// period, its output still reaching its log, and the next attempt finds what it saved.

import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { jobWorkDir, nodeDir } from '../../../local/paths.ts';
import { finish, runToEnd, useLocalRuntimes, waitFor, yaml } from '../../support/local-harness.ts';
import { linesInOrder } from '../../support/fixtures/text.ts';
import { chaos, processesOfJob } from './world.ts';

const open = useLocalRuntimes();

/**
 * Attempt 1 trains until told to stop; then it prints, works one more second, saves its
 * checkpoint and prints again. Any later attempt shows what it found and succeeds.
 */
const CHECKPOINTING_TASK = yaml`
  resources:
    use_spot: true
  run: |
    if [ "$RELAUNCH_ATTEMPT" -gt 1 ]; then echo "resumed from $(cat checkpoint 2>/dev/null || echo nothing)"; exit 0; fi
    trap 'echo "got SIGTERM, saving"; sleep 1; echo step-42 > checkpoint; echo saved; exit 0' TERM
    echo $$ > started
    echo training
    while :; do sleep 0.1; done
`;

describe('a job that saves a checkpoint when it is told to stop', () => {
  it('gets its grace period on a cancel: the checkpoint is written and its prints are in its log', { timeout: 60_000 }, async () => {
    const t = await open();
    const { jobId } = await t.runtime.submit(CHECKPOINTING_TASK);
    const work = jobWorkDir(t.dataDir, jobId);
    await waitFor('the job to start training', () => (existsSync(path.join(work, 'started')) ? true : undefined));

    await t.runtime.cancel(jobId);
    const job = await finish(t, jobId);
    // The job is CANCELLED once its instance is told to go; the node then takes its grace
    // period to stop (as an EC2 instance shuts down after TerminateInstances answers).
    await waitFor(`the processes of ${jobId} to be gone`, () => (processesOfJob(jobId).length === 0 ? true : undefined), 15_000);

    expect(job.view.status).toBe('CANCELLED');
    expect(readFileSync(path.join(work, 'checkpoint'), 'utf8')).toBe('step-42\n');
    const log = readFileSync(path.join(nodeDir(t.dataDir, jobId, 1, 0), 'run.log'), 'utf8');
    expect(linesInOrder(log, ['training', 'got SIGTERM, saving', 'saved'])).toEqual(['training', 'got SIGTERM, saving', 'saved']);
  });

  it('gets its grace period on a spot preemption, and the next attempt resumes from it', { timeout: 90_000 }, async () => {
    const t = await open();
    const job = await runToEnd(t, CHECKPOINTING_TASK, {
      chaos: chaos`
        faults:
          - attempt: 1
            preempt: {node: 0, after: 1s, warning: 20s}
      `,
    });

    expect(job.view.status).toBe('SUCCEEDED');
    expect(job.view.attempts.map((attempt) => attempt.outcome)).toEqual(['PREEMPTED', 'EXITED']);
    expect(readFileSync(path.join(jobWorkDir(t.dataDir, job.jobId), 'checkpoint'), 'utf8')).toBe('step-42\n');
    const log = readFileSync(path.join(nodeDir(t.dataDir, job.jobId, 1, 0), 'run.log'), 'utf8');
    expect(linesInOrder(log, ['training', 'got SIGTERM, saving', 'saved'])).toEqual(['training', 'got SIGTERM, saving', 'saved']);
    expect(readFileSync(path.join(nodeDir(t.dataDir, job.jobId, 2, 0), 'run.log'), 'utf8')).toBe('resumed from step-42\n');
    // The agent stopped the job at the warning: attempt 1 ended before the instance's 20 s
    // were up (left to the instance's end, it could not end sooner).
    const [first] = job.attempts;
    expect(Date.parse(first?.endedAt ?? '') - Date.parse(first?.interruptionNoticedAt ?? '')).toBeLessThan(20_000);
  });
});

/**
 * Attempt 1 counts every SIGTERM it gets (one line each in `signals`) and, on the first,
 * rewrites its checkpoint in place over 6 s: a second signal would start the save again
 * and empty the file. Any later attempt succeeds at once.
 */
const COUNTING_TASK = yaml`
  resources:
    use_spot: true
  run: |
    if [ "$RELAUNCH_ATTEMPT" -gt 1 ]; then exit 0; fi
    save() {
      echo term >> signals
      : > checkpoint
      for part in 1 2 3 4 5 6; do echo "part $part" >> checkpoint; sleep 1; done
      echo saved
      exit 0
    }
    trap save TERM
    echo $$ > started
    while :; do sleep 0.1; done
`;

const WHOLE_CHECKPOINT = ['part 1', 'part 2', 'part 3', 'part 4', 'part 5', 'part 6', ''].join('\n');

describe('a stop gives the job one SIGTERM, from the agent, and its whole grace period', () => {
  it('on a cancel: one signal, and the 6 s in-place save is whole', { timeout: 90_000 }, async () => {
    const t = await open();
    const { jobId } = await t.runtime.submit(COUNTING_TASK);
    const work = jobWorkDir(t.dataDir, jobId);
    await waitFor('the job to start', () => (existsSync(path.join(work, 'started')) ? true : undefined));

    await t.runtime.cancel(jobId);
    await finish(t, jobId);
    await waitFor(`the processes of ${jobId} to be gone`, () => (processesOfJob(jobId).length === 0 ? true : undefined), 30_000);

    expect(readFileSync(path.join(work, 'signals'), 'utf8')).toBe('term\n');
    expect(readFileSync(path.join(work, 'checkpoint'), 'utf8')).toBe(WHOLE_CHECKPOINT);
  });

  it('on a preemption whose warning is shorter than the grace: one signal, and the save is whole', { timeout: 90_000 }, async () => {
    const t = await open();
    const job = await runToEnd(t, COUNTING_TASK, {
      chaos: chaos`
        faults:
          - attempt: 1
            preempt: {node: 0, after: 1s, warning: 3s}
      `,
    });
    await waitFor(`the processes of ${job.jobId} to be gone`, () => (processesOfJob(job.jobId).length === 0 ? true : undefined), 30_000);

    expect(job.view.attempts.map((attempt) => attempt.outcome)).toEqual(['PREEMPTED', 'EXITED']);
    const work = jobWorkDir(t.dataDir, job.jobId);
    expect(readFileSync(path.join(work, 'signals'), 'utf8')).toBe('term\n');
    expect(readFileSync(path.join(work, 'checkpoint'), 'utf8')).toBe(WHOLE_CHECKPOINT);
  });
});
