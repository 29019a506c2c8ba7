// Reading jobs for the API and the CLI.

import { toJobSummary, toJobView, type JobSummary, type JobView } from '../views.ts';
import type { UseCaseDeps } from './deps.ts';

/** One job with its attempts; an unknown id is JobNotFoundError. */
export async function getJob(jobId: string, deps: Pick<UseCaseDeps, 'store'>): Promise<JobView> {
  const job = await deps.store.getJob(jobId);
  const attempts = await deps.store.listAttempts(jobId);
  return toJobView(job, attempts);
}

/** Jobs, newest first, as `GET /jobs` answers them. */
export async function listJobs(deps: Pick<UseCaseDeps, 'store'>, options?: { limit?: number }): Promise<{ jobs: JobSummary[] }> {
  const jobs = await deps.store.listJobs(options);
  return { jobs: jobs.map(toJobSummary) };
}
