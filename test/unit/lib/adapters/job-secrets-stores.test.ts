// The two JobSecrets stores: SSM SecureStrings (what is sent, against a mocked SSM) and the
// local runtime's files (who may read them).

import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DeleteParameterCommand, GetParameterCommand, PutParameterCommand, SSMClient, SSMServiceException } from '@aws-sdk/client-ssm';
import { mockClient } from 'aws-sdk-client-mock';
import 'aws-sdk-client-mock-vitest/extend';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SsmJobSecrets } from '../../../../lib/adapters/ssm-job-secrets.ts';
import { jobSecretsPath } from '../../../../lib/workflow/resources.ts';
import { TransientError } from '../../../../lib/errors.ts';
import { FileJobSecrets } from '../../../../local/file-job-secrets.ts';

const ssmError = (name: string, status = 400) => new SSMServiceException({ name, $fault: status >= 500 ? 'server' : 'client', $metadata: { httpStatusCode: status }, message: name });

describe('SsmJobSecrets', () => {
  const ssm = mockClient(SSMClient);
  const secrets = new SsmJobSecrets({ ssm: new SSMClient({ region: 'us-east-1' }), path: jobSecretsPath('relaunch') });
  beforeEach(() => ssm.reset());

  it('puts one SecureString per job, as JSON, overwriting a repeat', async () => {
    await secrets.put('j-1', { TOKEN: 'a "b"\nc' });

    expect(ssm).toHaveReceivedCommandWith(PutParameterCommand, {
      Name: '/relaunch/job-secrets/j-1',
      Value: JSON.stringify({ TOKEN: 'a "b"\nc' }),
      Type: 'SecureString',
      Overwrite: true,
      Tier: 'Intelligent-Tiering',
    });
  });

  it('reads them decrypted, {} when there are none, and refuses a value that is not secrets', async () => {
    ssm.on(GetParameterCommand, { Name: '/relaunch/job-secrets/j-1', WithDecryption: true }).resolves({ Parameter: { Value: '{"TOKEN":"t"}' } });
    ssm.on(GetParameterCommand, { Name: '/relaunch/job-secrets/j-2' }).rejects(ssmError('ParameterNotFound'));
    ssm.on(GetParameterCommand, { Name: '/relaunch/job-secrets/j-3' }).resolves({ Parameter: { Value: '["not", "a", "map"]' } });

    expect(await secrets.get('j-1')).toEqual({ TOKEN: 't' });
    expect(await secrets.get('j-2')).toEqual({});
    await expect(secrets.get('j-3')).rejects.toThrow('does not hold a job');
  });

  it('deletes them, a missing parameter being already deleted; throttling is a TransientError', async () => {
    ssm.on(DeleteParameterCommand).rejectsOnce(ssmError('ParameterNotFound')).rejects(ssmError('ThrottlingException'));

    await secrets.delete('j-1');
    await expect(secrets.delete('j-1')).rejects.toBeInstanceOf(TransientError);
    expect(ssm).toHaveReceivedCommandWith(DeleteParameterCommand, { Name: '/relaunch/job-secrets/j-1' });
  });
});

describe('FileJobSecrets', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'relaunch-secrets-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('keeps each job in a file only the user may read, in a folder only the user may enter', async () => {
    const secrets = new FileJobSecrets(dir);

    await secrets.put('j-1', { TOKEN: 't' });

    expect(await secrets.get('j-1')).toEqual({ TOKEN: 't' });
    expect(statSync(join(dir, 'secrets')).mode & 0o777).toBe(0o700);
    expect(statSync(join(dir, 'secrets', 'j-1.json')).mode & 0o777).toBe(0o600);
    expect(readdirSync(join(dir, 'secrets'))).toEqual(['j-1.json']);
  });

  it('forgets a job, reads {} for one it never held, and refuses a corrupt file', async () => {
    const secrets = new FileJobSecrets(dir);
    await secrets.put('j-1', { TOKEN: 't' });

    await secrets.delete('j-1');
    await secrets.delete('j-1');

    expect(await secrets.get('j-1')).toEqual({});
    writeFileSync(join(dir, 'secrets', 'j-2.json'), '{"TOKEN": 42}');
    await expect(secrets.get('j-2')).rejects.toThrow("expected a job's secrets");
  });

  it('refuses a job id that could name another path', async () => {
    const secrets = new FileJobSecrets(dir);
    for (const jobId of ['../escape', 'a/b', '', '.hidden']) {
      await expect(secrets.put(jobId, { A: 'x' })).rejects.toThrow('jobId: expected a job id');
    }
  });
});
