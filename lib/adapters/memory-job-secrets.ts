// JobSecrets in memory: for tests and simulations, which store no secret anywhere else.

import type { JobSecrets } from '../ports.ts';

/** JobSecrets in a map, per job. */
export class InMemoryJobSecrets implements JobSecrets {
  private readonly byJob = new Map<string, Readonly<Record<string, string>>>();

  async put(jobId: string, values: Readonly<Record<string, string>>): Promise<void> {
    this.byJob.set(jobId, { ...values });
  }

  async get(jobId: string): Promise<Readonly<Record<string, string>>> {
    return this.byJob.get(jobId) ?? {};
  }

  async delete(jobId: string): Promise<void> {
    this.byJob.delete(jobId);
  }

  /** The jobs whose secrets are held. */
  jobs(): string[] {
    return [...this.byJob.keys()];
  }
}
