// A failure of the agent's own steps, end to end through the real CLI, the local runtime and
// the real agent: Docker Hub's 429 on every pull of attempt 1 ends it AGENT_FAILED, the
// job is recovered without touching max_restarts_on_errors (0 here), attempt 2 runs, and
// `run --json`, `status` and `logs` say which step failed and why. Docker is a stand-in on
// PATH that records its calls and runs `docker exec`'s command on this machine.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { JobView } from '../../../lib/views.ts';
import { killStrayClis, parseStdout, PULL_RATE_LIMITED, removeTempDirs, runCli, SLOW, standInDocker, tempDir, writeTask } from '../../support/cli.ts';

afterAll(async () => {
  killStrayClis();
  await removeTempDirs();
});

describe("the agent's own failure, end to end", () => {
  it(
    'recovers an attempt whose image pull was rate limited, charges nothing to the job, and says so in run --json, status and logs',
    async () => {
      const dir = await tempDir('agent-failed');
      const file = await writeTask(
        dir,
        'task.yaml',
        'resources:\n  image_id: docker:ubuntu:22.04\n  job_recovery:\n    max_restarts_on_errors: 0\nrun: |\n  echo "in container: $IN_CONTAINER"\n',
      );
      const env = { PATH: standInDocker(dir, { pullFailures: 3 }), DOCKER_LOG: join(dir, 'docker.log') };
      const data = join(dir, 'data');

      const result = await runCli(['run', file, '--json', '--data-dir', data], { cwd: dir, env });

      expect(result.code, result.stderr).toBe(0);
      const view = parseStdout<JobView>(result);
      expect(view).toMatchObject({ status: 'SUCCEEDED', restartsOnErrors: 0, recoveryCount: 1 });
      const error = `could not pull ubuntu:22.04 in 3 tries: ${PULL_RATE_LIMITED}`;
      expect(view.attempts).toMatchObject([
        { attempt: 1, outcome: 'AGENT_FAILED', phase: 'setup', exitCodes: [null], decision: 'RECOVER', agentFailure: { nodeRank: 0, step: 'image-pull', error } },
        { attempt: 2, outcome: 'EXITED', exitCodes: [0], decision: 'SUCCEED', agentFailure: null },
      ]);
      expect(view.attempts[0]?.reason).toBe(
        `the agent failed on node 0 at image-pull: ${error}; relaunch's failure, not the job's, 1 of 3 in a row before the job fails; recovery 1, does not count toward max_restarts_on_errors`,
      );
      expect(readFileSync(env.DOCKER_LOG, 'utf8').split('\n').filter((call) => call.startsWith('pull '))).toHaveLength(4);

      const status = await runCli(['status', view.jobId, '--data-dir', data], { cwd: dir, env });
      expect(status.code).toBe(0);
      expect(status.stdout).toContain(`attempt 1: relaunch's agent failed on node 0 at image-pull, before setup (not the job's failure): ${error}`);

      const logs = await runCli(['logs', view.jobId, '--attempt', '1', '--data-dir', data], { cwd: dir, env });
      expect(logs.code).toBe(0);
      expect(logs.stdout).toContain(PULL_RATE_LIMITED);
      expect(logs.stdout).toContain(`(node 0: relaunch's agent failed at image-pull before setup, not the job: ${error})`);
    },
    SLOW,
  );
});
