// Where the local runtime keeps each attempt's output (LocalProcessCompute writes it).

import path from 'node:path';

/** `<dataDir>/logs/<jobId>/attempt-<n>.log`. */
export function attemptLogPath(dataDir: string, jobId: string, attempt: number): string {
  return path.join(path.resolve(dataDir), 'logs', jobId, `attempt-${attempt}.log`);
}
