// `relaunch run` prints what happened in the order it happened: a real local run of two
// nodes whose attempt 1 is warned (chaos) and replaced by a standby (launch_on_warning).
// Each output line says its attempt and node, and bash's bare `Terminated` stays out.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { nodeDir } from '../../../local/paths.ts';
import { killStrayClis, removeTempDirs, runCli, SLOW, tempDir, writeTask } from '../../support/cli.ts';

afterAll(async () => {
  killStrayClis();
  await removeTempDirs();
});

/**
 * Attempt 1's run sleeps until the notice stops it (bash then says `Terminated` of its
 * sleep, in the job's own log), and exits once the standby's setup has run on its node.
 */
const TASK = `name: order
num_nodes: 2
resources:
  use_spot: true
  job_recovery:
    launch_on_warning: true
setup: |
  echo "setup of attempt $RELAUNCH_ATTEMPT"
  if [ "$RELAUNCH_ATTEMPT" -eq 2 ]; then touch "standby-ready-$RELAUNCH_NODE_RANK"; fi
run: |
  echo "run of attempt $RELAUNCH_ATTEMPT"
  if [ "$RELAUNCH_ATTEMPT" -eq 1 ]; then
    trap 'echo "attempt 1 stopping"; while [ ! -f "standby-ready-$RELAUNCH_NODE_RANK" ]; do sleep 0.05; done; exit 0' TERM
    sleep 60
  fi
  echo "end of attempt $RELAUNCH_ATTEMPT"
`;

const CHAOS = 'faults:\n  - attempt: 1\n    preempt: {after: 0s, warning: 10s}\n';

/** The index of the first line matching `pattern`, failing the test when none does. */
function indexOf(lines: readonly string[], pattern: RegExp): number {
  const at = lines.findIndex((line) => pattern.test(line));
  expect(at, `a line matching ${pattern}\n${lines.join('\n')}`).toBeGreaterThanOrEqual(0);
  return at;
}

describe('relaunch run with a standby and two nodes', { timeout: SLOW }, () => {
  it('prints events and output in order, each output line with its attempt and node, and no bare Terminated', async () => {
    const dir = await tempDir('order');
    const data = join(dir, 'data');
    const task = await writeTask(dir, 'task.yaml', TASK);
    const chaos = await writeTask(dir, 'chaos.yaml', CHAOS);

    const ran = await runCli(['run', task, '--data-dir', data, '--chaos', chaos], { cwd: dir });

    expect(ran.code, ran.stderr).toBe(0);
    const lines = ran.stdout.trimEnd().split('\n');
    const jobId = /^(j-\S+) SUCCEEDED after 2 attempts/m.exec(ran.stdout)?.[1] as string;
    const stamp = String.raw`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+`;

    // Each attempt's launch follows the change that started it; its output follows its launch.
    const starting1 = indexOf(lines, new RegExp(`^${stamp} STARTING {3}launching attempt 1 `));
    const launched1 = indexOf(lines, new RegExp(`^${stamp} attempt 1 launched `));
    const output1 = indexOf(lines, /^\(attempt 1, node \d\) /);
    expect(starting1).toBeLessThan(launched1);
    expect(launched1).toBeLessThan(output1);
    const standby = indexOf(lines, new RegExp(`^${stamp} attempt 2 launched \\(spot, local-process in local\\) as the standby of attempt 1$`));
    const taken = indexOf(lines, new RegExp(`^${stamp} STARTING {3}taking standby attempt 2 `));
    expect(standby).toBeLessThan(indexOf(lines, /^\(attempt 2, node 0\) setup of attempt 2$/));
    expect(standby).toBeLessThan(indexOf(lines, /^\(attempt 2, node 1\) setup of attempt 2$/));
    expect(taken).toBeLessThan(indexOf(lines, /^\(attempt 2, node 0\) run of attempt 2$/));
    expect(taken).toBeLessThan(indexOf(lines, /^\(attempt 2, node 1\) run of attempt 2$/));
    expect(indexOf(lines, /^\(attempt 2, node 1\) end of attempt 2$/)).toBeLessThan(indexOf(lines, new RegExp(`^${stamp} SUCCEEDED `)));

    // Every line is an event, the summary, or output that names its attempt and node.
    const unnamed = lines.filter((line) => !new RegExp(`^(${stamp} |\\(attempt [12], node [01]\\) |${jobId} )`).test(line));
    expect(unnamed).toEqual([]);
    // bash wrote Terminated in the job's log when the notice killed its sleep; run leaves it out.
    expect(readFileSync(join(nodeDir(data, jobId, 1, 1), 'run.log'), 'utf8')).toMatch(/^Terminated$/m);
    expect(lines.filter((line) => /(^|\) )Terminated$/.test(line))).toEqual([]);
  });
});
