// The agent's own SigV4 signing (lib/agent/agent.sh signs its SSM read with openssl, by
// hand), checked by a second implementation: moto_server with authentication on, which
// recomputes every signature with botocore. The shipped agent runs as cloud-init starts
// it (test/support/agent-harness.ts), its instance role's credentials from STS.

import { CreateRoleCommand, IAMClient, PutRolePolicyCommand } from '@aws-sdk/client-iam';
import { PutParameterCommand, SSMClient } from '@aws-sdk/client-ssm';
import { AssumeRoleCommand, STSClient } from '@aws-sdk/client-sts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentSecretName, agentSecretValue } from '../../../lib/agent/secret-parameter.ts';
import { api, INSTANCE_ID, jobEnv, DUMP_ENV, runAgent, SECRET, SECRET_PATH, spec, useAgentWorld } from '../../support/agent-harness.ts';
import { MOTO_ACCOUNT, startMoto, type Moto } from './moto.ts';

const REGION = 'us-east-1';
const SETUP_KEY = { accessKeyId: 'AKIASETUPSETUPSETUP0', secretAccessKey: 'setup' };
const JOB_SECRETS = { HF_TOKEN: 'hf_from-moto', SLASHED: '???' };

let moto: Moto;
let role: { accessKeyId: string; secretAccessKey: string; sessionToken: string };

useAgentWorld();

beforeAll(async () => {
  // The first four requests go unchecked: the role, its policy, its credentials and the
  // parameter are made with them; the agent's GetParameter is the fifth, and checked.
  moto = await startMoto({ env: { INITIAL_NO_AUTH_ACTION_COUNT: '4' } });
  const config = { region: REGION, endpoint: moto.endpoint, credentials: SETUP_KEY };
  const trust = { Version: '2012-10-17', Statement: [{ Effect: 'Allow', Principal: { Service: 'ec2.amazonaws.com' }, Action: 'sts:AssumeRole' }] };
  const iam = new IAMClient(config);
  await iam.send(new CreateRoleCommand({ RoleName: 'node', AssumeRolePolicyDocument: JSON.stringify(trust) }));
  const policy = { Version: '2012-10-17', Statement: [{ Effect: 'Allow', Action: 'ssm:GetParameter', Resource: '*' }] };
  await iam.send(new PutRolePolicyCommand({ RoleName: 'node', PolicyName: 'secret', PolicyDocument: JSON.stringify(policy) }));
  const assumed = await new STSClient(config).send(new AssumeRoleCommand({ RoleArn: `arn:aws:iam::${MOTO_ACCOUNT}:role/node`, RoleSessionName: INSTANCE_ID }));
  role = {
    accessKeyId: assumed.Credentials?.AccessKeyId as string,
    secretAccessKey: assumed.Credentials?.SecretAccessKey as string,
    sessionToken: assumed.Credentials?.SessionToken as string,
  };
  await new SSMClient(config).send(
    new PutParameterCommand({ Name: agentSecretName(SECRET_PATH, INSTANCE_ID), Value: agentSecretValue(SECRET, JOB_SECRETS), Type: 'SecureString' }),
  );
});
afterAll(async () => {
  await moto?.stop();
});

describe("the agent's SigV4-signed GetParameter, checked by moto", () => {
  const secretSource = () => ({ path: SECRET_PATH, region: REGION, endpoint: moto.endpoint });

  it('is accepted: the agent reads its secret from moto, runs setup and run, and reports both', async () => {
    Object.assign(api.credentials, role);

    const result = await runAgent({ spec: spec({ run: DUMP_ENV }), nodeRank: 0, secretSource: secretSource(), discoveryTimeoutSeconds: 0 });

    expect(result).toMatchObject({ exitCode: 0, shutDown: true });
    expect(api.reports.map(({ phase, exitCode }) => [phase, exitCode])).toEqual([
      ['setup', 0],
      ['run', 0],
    ]);
    expect(jobEnv()).toMatchObject(JOB_SECRETS);
  });

  it('is refused when signed with another secret key: moto checks the signature, and the agent reports nothing', async () => {
    Object.assign(api.credentials, { ...role, secretAccessKey: `${role.secretAccessKey.slice(0, -1)}${role.secretAccessKey.endsWith('A') ? 'B' : 'A'}` });

    const result = await runAgent({ spec: spec(), nodeRank: 0, secretSource: secretSource(), discoveryTimeoutSeconds: 0 });

    expect(result.exitCode).not.toBe(0);
    expect(result.stderr).toMatch(/the callback secret is not readable yet: HTTP 403/);
    expect(api.reports).toEqual([]);
  });
});
