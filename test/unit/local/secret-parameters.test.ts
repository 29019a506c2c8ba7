// The local SSM stand-in, driven by the AWS SDK's own SSMClient over HTTP: its SigV4 check
// accepts what the SDK signs and refuses what was tampered with, and the SDK reads its
// answers (values and SSM's error codes) as it reads SSM's.

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { GetParameterCommand, SSMClient } from '@aws-sdk/client-ssm';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LocalSecretParameters, newNodeCredentials, type ParameterCaller } from '../../../local/secret-parameters.ts';
import { verifySigV4, type SignedRequest } from '../../../local/sigv4.ts';

const OWNER = 'arn:aws:ec2:local:000000000000:instance/local-j-1-1-0';
const NAME = '/relaunch-local/agent-secrets/local-j-1-1-0';
const VALUE = 'ab'.repeat(32);

let server: Server;
let endpoint: string;
let parameters: LocalSecretParameters;
let caller: ParameterCaller;
/** The requests as the server received them. */
let received: SignedRequest[];

beforeEach(async () => {
  parameters = new LocalSecretParameters();
  parameters.put(NAME, VALUE, OWNER);
  caller = { instanceArn: OWNER, credentials: newNodeCredentials() };
  received = [];
  server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const headers = Object.fromEntries(Object.entries(request.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : v]));
      const signed: SignedRequest = { method: request.method ?? '', path: request.url ?? '', headers, body: Buffer.concat(chunks).toString('utf8') };
      received.push(signed);
      const answer = parameters.answer(signed, caller, new Date());
      response.writeHead(answer.statusCode, answer.headers).end(answer.body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}/_node/local-j-1-1-0/ssm`;
});

afterEach(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

function client(credentials = caller.credentials): SSMClient {
  return new SSMClient({ region: 'local', endpoint, credentials, maxAttempts: 1 });
}

describe('the local SSM, asked by the SDK', () => {
  it("answers the owner's signed GetParameter with the value", async () => {
    const answer = await client().send(new GetParameterCommand({ Name: NAME, WithDecryption: true }));

    expect(answer.Parameter).toMatchObject({ Name: NAME, Type: 'SecureString', Value: VALUE });
  });

  it("refuses another instance, as IAM's tag condition does, and a parameter that does not exist the same way", async () => {
    caller = { ...caller, instanceArn: 'arn:aws:ec2:local:000000000000:instance/local-j-2-1-0' };
    await expect(client().send(new GetParameterCommand({ Name: NAME }))).rejects.toMatchObject({ name: 'AccessDeniedException' });

    caller = { ...caller, instanceArn: OWNER };
    await expect(client().send(new GetParameterCommand({ Name: `${NAME}-not-there` }))).rejects.toMatchObject({ name: 'AccessDeniedException' });
  });

  it('refuses requests signed with other credentials or a wrong session token', async () => {
    const other = newNodeCredentials();
    await expect(client(other).send(new GetParameterCommand({ Name: NAME }))).rejects.toMatchObject({ name: 'UnrecognizedClientException' });
    await expect(client({ ...caller.credentials, secretAccessKey: other.secretAccessKey }).send(new GetParameterCommand({ Name: NAME }))).rejects.toMatchObject({
      name: 'InvalidSignatureException',
    });
    await expect(client({ ...caller.credentials, sessionToken: other.sessionToken }).send(new GetParameterCommand({ Name: NAME }))).rejects.toMatchObject({
      name: 'UnrecognizedClientException',
    });
  });

  it('a deleted parameter is gone', async () => {
    parameters.delete(NAME);

    await expect(client().send(new GetParameterCommand({ Name: NAME }))).rejects.toMatchObject({ name: 'AccessDeniedException' });
    expect(parameters.size).toBe(0);
  });
});

describe('verifySigV4, on a request the SDK signed', () => {
  async function signedBySdk(): Promise<SignedRequest> {
    await client().send(new GetParameterCommand({ Name: NAME, WithDecryption: true }));
    return received[0] as SignedRequest;
  }
  const lookup = () => caller.credentials;

  it('accepts it as sent, naming the region of its scope', async () => {
    const request = await signedBySdk();

    expect(verifySigV4(request, 'ssm', lookup, new Date())).toMatchObject({ region: 'local', credentials: caller.credentials });
  });

  it('refuses it once anything signed changes: the body, the path, a signed header, the method', async () => {
    const request = await signedBySdk();
    const tampered: SignedRequest[] = [
      { ...request, body: request.body.replace(NAME, `${NAME}x`) },
      { ...request, path: request.path.replace('local-j-1-1-0', 'local-j-2-1-0') },
      { ...request, headers: { ...request.headers, 'x-amz-target': 'AmazonSSM.DeleteParameter' } },
      { ...request, method: 'PUT' },
    ];
    for (const changed of tampered) {
      expect(verifySigV4(changed, 'ssm', lookup, new Date())).toMatchObject({ refused: { code: 'InvalidSignatureException' } });
    }
  });

  it('refuses it for another service, long after it was signed, or without its Authorization', async () => {
    const request = await signedBySdk();

    expect(verifySigV4(request, 'kms', lookup, new Date())).toMatchObject({ refused: { code: 'InvalidSignatureException' } });
    expect(verifySigV4(request, 'ssm', lookup, new Date(Date.now() + 16 * 60_000))).toMatchObject({
      refused: { code: 'InvalidSignatureException', message: expect.stringContaining('expired') },
    });
    const { authorization: _, ...unsigned } = request.headers;
    expect(verifySigV4({ ...request, headers: unsigned }, 'ssm', lookup, new Date())).toMatchObject({ refused: { code: 'MissingAuthenticationToken' } });
  });

  it('refuses hostile Authorization headers with a code, never a throw', async () => {
    const request = await signedBySdk();
    const hostile = [
      '',
      'Bearer abc',
      'AWS4-HMAC-SHA256 Credential=/x',
      `AWS4-HMAC-SHA256 Credential=${caller.credentials.accessKeyId}/20261203/local/ssm/aws4_request, SignedHeaders=, Signature=${'0'.repeat(64)}`,
      `AWS4-HMAC-SHA256 Credential=${caller.credentials.accessKeyId}/20261203/local/ssm/aws4_request, SignedHeaders=content-type, Signature=${'0'.repeat(64)}`,
      `AWS4-HMAC-SHA256 Credential=${caller.credentials.accessKeyId}/99999999/local/ssm/aws4_request, SignedHeaders=host;x-amz-date, Signature=${'0'.repeat(64)}`,
      'x'.repeat(100_000),
    ];
    for (const authorization of hostile) {
      const verdict = verifySigV4({ ...request, headers: { ...request.headers, authorization } }, 'ssm', lookup, new Date());
      expect(verdict).toHaveProperty('refused.code');
    }
  });
});
