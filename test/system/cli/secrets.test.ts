// `secrets` end to end with the real binary: a value given at submit reaches the job's
// environment on every attempt, and nothing relaunch writes or prints holds it: not the
// data folder (records, scripts, logs), not `run`, `status`, `logs` or `validate`.

import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { JobView } from '../../../lib/views.ts';
import { DataDirInUseError } from '../../../local/owner-lock.ts';
import { LocalRuntime } from '../../../local/runtime.ts';
import { killStrayClis, parseStdout, removeTempDirs, runCli, runInProcess, serverInfo, SLOW, tempDir, waitFor, writeTask } from '../../support/cli.ts';

afterAll(async () => {
  killStrayClis();
  await removeTempDirs();
});

const PLANTED = 'planted-S3CRET-value-7f1d';
const IN_FILE = 'file-S3CRET-value-9c2e';

/** Attempt 1 exits 29 (listed, so relaunched); each attempt leaves the secrets' hashes in its work folder. */
const TASK = `name: secret-job
secrets:
  TOKEN: null
  FROM_FILE: ${IN_FILE}
resources:
  job_recovery:
    recover_on_exit_codes: [29]
run: |
  printf '%s' "$TOKEN" | sha256sum > "token-$RELAUNCH_ATTEMPT"
  printf '%s' "$FROM_FILE" | sha256sum > "from-file-$RELAUNCH_ATTEMPT"
  echo "attempt $RELAUNCH_ATTEMPT saw a token of $(printf '%s' "$TOKEN" | wc -c) bytes"
  if [ "$RELAUNCH_ATTEMPT" = 1 ]; then exit 29; fi
`;

const sha = (text: string) => `${createHash('sha256').update(text).digest('hex')}  -\n`;

/** Every file under `root` that holds `needle`. */
function filesHolding(root: string, needle: string): string[] {
  return readdirSync(root, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name))
    .filter((file) => readFileSync(file).includes(needle));
}

describe('secrets', () => {
  it(
    'reach every attempt of the job from --secret NAME and from the file, and nothing relaunch writes or prints',
    async () => {
      const dir = await tempDir('secrets');
      const file = await writeTask(dir, 'task.yaml', TASK);
      const data = join(dir, 'data');
      const env = { TOKEN: PLANTED };

      const run = await runCli(['run', file, '--secret', 'TOKEN', '--json', '--data-dir', data], { cwd: dir, env });

      expect(run.code, run.stderr).toBe(0);
      const view = parseStdout<JobView>(run);
      expect(view.attempts).toHaveLength(2);
      const work = join(data, 'jobs', view.jobId);
      for (const attempt of [1, 2]) {
        expect(readFileSync(join(work, `token-${attempt}`), 'utf8')).toBe(sha(PLANTED));
        expect(readFileSync(join(work, `from-file-${attempt}`), 'utf8')).toBe(sha(IN_FILE));
      }
      const status = await runInProcess(['status', view.jobId, '--json', '--data-dir', data]);
      const logs = await runInProcess(['logs', view.jobId, '--data-dir', data]);
      const validate = await runInProcess(['validate', file, '--json']);
      expect(logs.stdout).toContain('saw a token of 25 bytes');
      expect(parseStdout<{ spec: { secretNames: string[] } }>(validate).spec.secretNames).toEqual(['FROM_FILE', 'TOKEN']);
      expect(parseStdout<JobView & { spec?: { secretNames?: string[] } }>(status)).toBeDefined();
      // The job's records as stored (the database's files may be compressed, so they are
      // read through the store): the job with its spec, each attempt, the audit trail.
      // Once the background runtime that ran the job has gone idle and let the folder go:
      // its server.json goes a moment before its lock, so the open is tried until it takes it.
      await waitFor('the background runtime to go once idle', () => (serverInfo(data) === undefined ? true : undefined));
      const runtime = await waitFor('the folder\'s lock to be free', async () => {
        try {
          return await LocalRuntime.open({ dataDir: data });
        } catch (error) {
          if (error instanceof DataDirInUseError) return undefined;
          throw error;
        }
      });
      const { store } = runtime.deps;
      const job = await store.getJob(view.jobId);
      const records = JSON.stringify([job, await store.getAttempt(view.jobId, 1), await store.getAttempt(view.jobId, 2), await store.listEvents(view.jobId)]);
      await runtime.close();
      expect(job.spec.secretNames).toEqual(['FROM_FILE', 'TOKEN']);
      for (const value of [PLANTED, IN_FILE]) {
        expect(records).not.toContain(value);
        for (const output of [run, status, logs, validate]) expect(output.stdout + output.stderr).not.toContain(value);
        expect(filesHolding(data, value)).toEqual([]);
      }
      // The job has ended: its secrets are gone from the store too.
      expect(readdirSync(join(data, 'secrets'))).toEqual([]);
    },
    SLOW,
  );

  it('refuse a null secret nobody gave: exit 2 naming it and how to give it, no job', async () => {
    const dir = await tempDir('secrets-missing');
    const file = await writeTask(dir, 'task.yaml', TASK);

    const result = await runCli(['run', file, '--data-dir', join(dir, 'data')], { cwd: dir });

    expect(result.code).toBe(2);
    expect(result.stderr).toContain('secrets.TOKEN: expected a value at submit: give it with --secret TOKEN');
    expect(result.stderr).not.toContain(IN_FILE);
  });

  it('refuse --secret NAME when this environment has no NAME, and a name no shell takes', async () => {
    const dir = await tempDir('secrets-unset');
    const file = await writeTask(dir, 'task.yaml', TASK);

    const unset = await runCli(['run', file, '--secret', 'TOKEN', '--data-dir', join(dir, 'data')], { cwd: dir, env: { TOKEN: undefined } });
    const badName = await runCli(['run', file, '--secret', '1TOKEN=x', '--data-dir', join(dir, 'data')], { cwd: dir });

    expect(unset.code).toBe(2);
    expect(unset.stderr).toContain('--secret: TOKEN is not set in this environment');
    expect(badName.code).toBe(2);
    expect(badName.stderr).toContain('--secret: expected an environment variable name (letters, digits and _, not starting with a digit), got "1TOKEN" (given as NAME or NAME=VALUE)');
  });
});
