// What the fault tests share: chaos plans written as users write them (parsed by the real
// chaos parser), a look at the processes a job left on the machine, and a real server.

import { readdirSync, readFileSync } from 'node:fs';
import { parseChaosFile } from '../../../lib/chaos-file/parse.ts';
import type { ChaosPlan } from '../../../lib/chaos-file/types.ts';
import { startCli, waitForOutput, type Cli } from '../../support/cli.ts';
import { INSTANCE_MARK } from '../../../local/process-groups.ts';
import { yaml } from '../../support/local-harness.ts';

/** A chaos file's text, parsed by the same parser `--chaos FILE` uses. */
export function chaos(strings: TemplateStringsArray, ...values: unknown[]): ChaosPlan {
  return parseChaosFile(yaml(strings, ...values));
}

/**
 * The live processes of a job, as `ps` would show them: every process whose environment
 * carries the mark of one of the job's local instances. Zombies are dead and left out
 * (this machine's PID 1 does not reap orphans, so they linger as `<defunct>`).
 */
export function processesOfJob(jobId: string): { pid: number; command: string }[] {
  const mark = `${INSTANCE_MARK}=local-${jobId}-`;
  const found: { pid: number; command: string }[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(entry)) continue;
    try {
      const environ = readFileSync(`/proc/${entry}/environ`, 'utf8');
      if (!environ.split('\0').some((variable) => variable.startsWith(mark))) continue;
      const command = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
      found.push({ pid: Number(entry), command });
    } catch {
      // Gone while we looked.
    }
  }
  return found;
}

/** A job as `GET /jobs/{id}` answers it, as far as the fault tests read it. */
export interface JobAnswer {
  readonly status: string;
  readonly failureReason: string | null;
  readonly attempts: readonly { attempt: number; outcome: string | null; decision: string | null }[];
}

/** A real `relaunch serve` on a data folder, and the API calls the fault tests make to it. */
export interface Served {
  readonly cli: Cli;
  readonly url: string;
  submit(task: string): Promise<string>;
  cancel(jobId: string): Promise<number>;
  job(jobId: string): Promise<JobAnswer>;
}

/** Starts `relaunch serve --port 0` on `dataDir` (with `env` beside the tests' own) and waits until it listens. */
export async function serve(dataDir: string, env: NodeJS.ProcessEnv = {}): Promise<Served> {
  const cli = startCli(['serve', '--data-dir', dataDir, '--port', '0'], { cwd: dataDir, env });
  const [, url] = (await waitForOutput(cli, /relaunch API on (http:\/\/127\.0\.0\.1:\d+)/)) as unknown as [string, string];
  return {
    cli,
    url,
    async submit(task) {
      const response = await fetch(`${url}/jobs`, { method: 'POST', headers: { 'content-type': 'application/yaml' }, body: task });
      if (response.status !== 202) throw new Error(`submit answered ${response.status}: ${await response.text()}`);
      return ((await response.json()) as { jobId: string }).jobId;
    },
    async cancel(jobId) {
      return (await fetch(`${url}/jobs/${jobId}`, { method: 'DELETE' })).status;
    },
    async job(jobId) {
      return (await (await fetch(`${url}/jobs/${jobId}`)).json()) as JobAnswer;
    },
  };
}
