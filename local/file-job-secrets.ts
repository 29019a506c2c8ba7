// JobSecrets for the local runtime: one file per job, `<dataDir>/secrets/<job id>.json`, in a
// folder only the user may enter, each file readable by the user alone (0600). Written to a
// temporary name and renamed, so a crash never leaves half a file.

import { chmodSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { ConfigurationError, InvalidInputError } from '../lib/errors.ts';
import { parseValues } from '../lib/adapters/ssm-job-secrets.ts';
import type { JobSecrets } from '../lib/ports.ts';
import { writeWhole } from './write-whole.ts';

/** Job ids are relaunch's own (`j-...`); anything else is refused before it can name a path. */
const JOB_ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;

export class FileJobSecrets implements JobSecrets {
  private readonly dir: string;

  constructor(dataDir: string) {
    this.dir = path.join(path.resolve(dataDir), 'secrets');
  }

  async put(jobId: string, values: Readonly<Record<string, string>>): Promise<void> {
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    chmodSync(this.dir, 0o700);
    const file = this.file(jobId);
    writeWhole(file, JSON.stringify(values), 0o600);
  }

  async get(jobId: string): Promise<Readonly<Record<string, string>>> {
    let text: string;
    try {
      text = readFileSync(this.file(jobId), 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return {};
      throw error;
    }
    const values = parseValues(text);
    if (values === null) throw new ConfigurationError(`${this.file(jobId)}: expected a job's secrets (a JSON object of strings); the file was changed outside relaunch`);
    return values;
  }

  async delete(jobId: string): Promise<void> {
    rmSync(this.file(jobId), { force: true });
  }

  private file(jobId: string): string {
    if (!JOB_ID.test(jobId)) throw new InvalidInputError([{ path: 'jobId', message: `expected a job id, got ${JSON.stringify(jobId.slice(0, 40))}` }]);
    return path.join(this.dir, `${jobId}.json`);
  }
}
