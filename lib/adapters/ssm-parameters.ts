// SSM Parameter Store as Ec2Compute uses it: AWS's public parameters naming the default
// AMIs, and the per-instance SecureStrings that carry each agent's callback secret.

import { AddTagsToResourceCommand, DeleteParametersCommand, GetParameterCommand, PutParameterCommand, type SSMClient } from '@aws-sdk/client-ssm';
import { awsErrorCode } from './aws-errors.ts';

/** One agent's secret, as the launcher writes it. */
export interface AgentSecretParameter {
  readonly name: string;
  readonly value: string;
  /** Tags; the owner tag (SECRET_OWNER_TAG) is what lets the one instance read it. */
  readonly tags: Readonly<Record<string, string>>;
}

/** The parameters Ec2Compute reads and writes, per region. Throttling and 5xx are thrown as they come. */
export interface Ec2Parameters {
  /** A parameter's value, or null when the region has no such parameter. */
  read(region: string, name: string): Promise<string | null>;
  /** Creates the SecureString; one that already exists (an earlier try of the same launch) is left as it is. */
  putSecret(region: string, secret: AgentSecretParameter): Promise<void>;
  /**
   * Writes the SecureString's value whether or not it exists (a node kept for the next
   * attempt gets that attempt's secret), then sets its tags: SSM takes no tags with an
   * overwrite, and a parameter created by the overwrite needs its owner tag.
   */
  rewriteSecret(region: string, secret: AgentSecretParameter): Promise<void>;
  /** Deletes the parameters; names that do not exist are fine. */
  delete(region: string, names: readonly string[]): Promise<void>;
}

/** DeleteParameters takes at most this many names a call. */
const DELETE_BATCH = 10;

/** Ec2Parameters over SSM, with `ssm(region)`'s client. */
export class SsmParameters implements Ec2Parameters {
  constructor(private readonly ssm: (region: string) => SSMClient) {}

  async read(region: string, name: string): Promise<string | null> {
    try {
      const response = await this.ssm(region).send(new GetParameterCommand({ Name: name }));
      return response.Parameter?.Value ?? null;
    } catch (error) {
      if (awsErrorCode(error) === 'ParameterNotFound') return null;
      throw error;
    }
  }

  async putSecret(region: string, secret: AgentSecretParameter): Promise<void> {
    try {
      await this.ssm(region).send(
        new PutParameterCommand({
          Name: secret.name,
          Value: secret.value,
          Type: 'SecureString',
          // Standard while the account has room (10,000 a region), advanced beyond: a sweep
          // of thousands of live nodes never fails a launch for want of parameters.
          Tier: 'Intelligent-Tiering',
          Description: 'relaunch: the callback secret of one instance of one attempt',
          Tags: Object.entries(secret.tags).map(([Key, Value]) => ({ Key, Value })),
        }),
      );
    } catch (error) {
      if (awsErrorCode(error) !== 'ParameterAlreadyExists') throw error;
    }
  }

  async rewriteSecret(region: string, secret: AgentSecretParameter): Promise<void> {
    await this.ssm(region).send(
      new PutParameterCommand({ Name: secret.name, Value: secret.value, Type: 'SecureString', Tier: 'Intelligent-Tiering', Overwrite: true }),
    );
    await this.ssm(region).send(
      new AddTagsToResourceCommand({ ResourceType: 'Parameter', ResourceId: secret.name, Tags: Object.entries(secret.tags).map(([Key, Value]) => ({ Key, Value })) }),
    );
  }

  async delete(region: string, names: readonly string[]): Promise<void> {
    for (let start = 0; start < names.length; start += DELETE_BATCH) {
      await this.ssm(region).send(new DeleteParametersCommand({ Names: names.slice(start, start + DELETE_BATCH) }));
    }
  }
}
