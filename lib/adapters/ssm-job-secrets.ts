// JobSecrets as SSM SecureStrings: one parameter per job, `<path>/<job id>`, its value the
// secrets as JSON, encrypted with the account's aws/ssm key. The API writes it at submit,
// LaunchAttempt reads it for each attempt, and the step that ends the job deletes it.

import { DeleteParameterCommand, GetParameterCommand, PutParameterCommand, type SSMClient } from '@aws-sdk/client-ssm';
import { UnexpectedCloudResponseError } from '../errors.ts';
import type { JobSecrets } from '../ports.ts';
import { awsErrorCode, sendAws } from './aws-errors.ts';

/** JobSecrets on SSM: one SecureString per job under `path`, in the client's region. */
export class SsmJobSecrets implements JobSecrets {
  constructor(private readonly deps: { readonly ssm: SSMClient; readonly path: string }) {}

  async put(jobId: string, values: Readonly<Record<string, string>>): Promise<void> {
    await sendAws('SSM PutParameter', () =>
      this.deps.ssm.send(
        new PutParameterCommand({
          Name: this.name(jobId),
          Value: JSON.stringify(values),
          Type: 'SecureString',
          // A put retried after an answer that was lost writes the same values again.
          Overwrite: true,
          // Standard up to 4 KB, advanced above: names and values may take 4 KiB as JSON text.
          Tier: 'Intelligent-Tiering',
          Description: "relaunch: one job's secrets, deleted when the job ends",
        }),
      ),
    );
  }

  async get(jobId: string): Promise<Readonly<Record<string, string>>> {
    let text: string | undefined;
    try {
      const answer = await sendAws('SSM GetParameter', () => this.deps.ssm.send(new GetParameterCommand({ Name: this.name(jobId), WithDecryption: true })));
      text = answer.Parameter?.Value;
    } catch (error) {
      if (awsErrorCode(error) === 'ParameterNotFound') return {};
      throw error;
    }
    const values = parseValues(text);
    if (values === null) throw new UnexpectedCloudResponseError(`SSM parameter ${this.name(jobId)} does not hold a job's secrets`);
    return values;
  }

  async delete(jobId: string): Promise<void> {
    try {
      await sendAws('SSM DeleteParameter', () => this.deps.ssm.send(new DeleteParameterCommand({ Name: this.name(jobId) })));
    } catch (error) {
      if (awsErrorCode(error) !== 'ParameterNotFound') throw error;
    }
  }

  private name(jobId: string): string {
    return `${this.deps.path}/${jobId}`;
  }
}

/** A JSON object of strings, or null. */
export function parseValues(text: string | undefined): Record<string, string> | null {
  try {
    const parsed = JSON.parse(text ?? '') as unknown;
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return null;
    const entries = Object.entries(parsed);
    if (!entries.every(([, value]) => typeof value === 'string')) return null;
    return Object.fromEntries(entries) as Record<string, string>;
  } catch {
    return null;
  }
}
