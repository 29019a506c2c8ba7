// Where the local runtime keeps each attempt's output and each job's working folder, for
// the process compute that writes them and the commands that read them.

import path from 'node:path';

/** `<dataDir>/logs/<jobId>/attempt-<n>.log`. */
export function attemptLogPath(dataDir: string, jobId: string, attempt: number): string {
  return path.join(path.resolve(dataDir), 'logs', jobId, `attempt-${attempt}.log`);
}

/** `<dataDir>/jobs/<jobId>`: a job's working folder when the task has no workdir. */
export function jobWorkDir(dataDir: string, jobId: string): string {
  return path.join(path.resolve(dataDir), 'jobs', jobId);
}
