// What the fault tests share: chaos plans written as users write them (parsed by the real
// chaos parser), and a look at the processes a job left on the machine.

import { readdirSync, readFileSync } from 'node:fs';
import { parseChaosFile, type ChaosPlan } from '../../local/chaos.ts';
import { INSTANCE_MARK } from '../../local/process-groups.ts';
import { yaml } from '../local/harness.ts';

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
