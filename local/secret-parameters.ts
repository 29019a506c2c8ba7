// SSM Parameter Store as local nodes see it: the launcher puts each node's callback secret
// under its instance, and the node's agent reads it with GetParameter, signed with the
// credentials its instance metadata hands out. As on AWS (see lib/agent/secret-parameter.ts),
// a node reads only the parameter tagged with its own instance's ARN; a request signed by
// anyone else, or not signed at all, is refused with SSM's error codes.

import { randomBytes } from 'node:crypto';
import { GET_PARAMETER_TARGET } from '../lib/agent/secret-parameter.ts';
import { headerValue } from '../lib/http/headers.ts';
import type { ApiResponse } from '../lib/http/index.ts';
import { verifySigV4, type Credentials, type SignedRequest } from './sigv4.ts';


/** The role name a local instance's metadata lists under `iam/security-credentials/`. */
export const LOCAL_INSTANCE_ROLE = 'relaunch-local-node';

/** A node's instance-role credentials: fresh random values per instance. */
export function newNodeCredentials(): Required<Credentials> {
  return {
    accessKeyId: `ASIA${randomBytes(8).toString('hex').toUpperCase()}`,
    secretAccessKey: randomBytes(30).toString('base64'),
    sessionToken: randomBytes(48).toString('base64'),
  };
}

/** The instance metadata document of a role's credentials, as IMDS serves it. */
export function credentialsDocument(credentials: Required<Credentials>, expires: Date): string {
  return JSON.stringify(
    {
      Code: 'Success',
      LastUpdated: new Date().toISOString(),
      Type: 'AWS-HMAC',
      AccessKeyId: credentials.accessKeyId,
      SecretAccessKey: credentials.secretAccessKey,
      Token: credentials.sessionToken,
      Expiration: expires.toISOString(),
    },
    null,
    2,
  );
}

/** Who is asking: a node, by its instance ARN and credentials. */
export interface ParameterCaller {
  readonly instanceArn: string;
  readonly credentials: Required<Credentials>;
}

interface StoredParameter {
  readonly value: string;
  /** The instance ARN its owner tag names. */
  readonly owner: string;
}

/** The local runtime's SecureStrings: in memory only, gone with the runtime. */
export class LocalSecretParameters {
  private readonly parameters = new Map<string, StoredParameter>();

  /** PutParameter with the owner tag. */
  put(name: string, value: string, ownerInstanceArn: string): void {
    this.parameters.set(name, { value, owner: ownerInstanceArn });
  }

  /** DeleteParameter; a missing one is fine. */
  delete(name: string): void {
    this.parameters.delete(name);
  }

  /** How many parameters are stored (a released attempt leaves none). */
  get size(): number {
    return this.parameters.size;
  }

  /**
   * Answers one SSM request from `caller`: only GetParameter, signed with the caller's own
   * credentials, for a parameter whose owner tag is the caller's instance.
   */
  answer(request: SignedRequest, caller: ParameterCaller, now: Date): ApiResponse {
    if (request.method !== 'POST') return ssmError(400, 'UnknownOperationException', 'expected POST');
    const verified = verifySigV4(request, 'ssm', (id) => (id === caller.credentials.accessKeyId ? caller.credentials : undefined), now);
    if ('refused' in verified) {
      const status = verified.refused.code === 'InvalidSignatureException' || verified.refused.code === 'MissingAuthenticationToken' ? 403 : 400;
      return ssmError(status, verified.refused.code, verified.refused.message);
    }
    const target = headerValue(request.headers, 'x-amz-target');
    if (target !== GET_PARAMETER_TARGET) return ssmError(400, 'UnknownOperationException', `the local SSM answers only ${GET_PARAMETER_TARGET}`);
    const name = parameterName(request.body);
    if (name === null) return ssmError(400, 'ValidationException', 'expected a JSON body with a Name');
    const stored = this.parameters.get(name);
    // The instance role's condition: the owner tag must be the caller's ARN. A parameter
    // that does not exist (yet) has no tag to match, so IAM refuses that the same way.
    if (stored === undefined || stored.owner !== caller.instanceArn) {
      return ssmError(400, 'AccessDeniedException', `${caller.instanceArn} is not authorized to perform ssm:GetParameter on ${name}`);
    }
    return {
      statusCode: 200,
      headers: { 'content-type': 'application/x-amz-json-1.1' },
      body: JSON.stringify({ Parameter: { Name: name, Type: 'SecureString', Value: stored.value, Version: 1, DataType: 'text' } }),
    };
  }
}

function parameterName(body: string): string | null {
  try {
    const parsed = JSON.parse(body) as { Name?: unknown };
    return typeof parsed.Name === 'string' && parsed.Name !== '' ? parsed.Name : null;
  } catch {
    return null;
  }
}

function ssmError(statusCode: number, type: string, message: string): ApiResponse {
  return { statusCode, headers: { 'content-type': 'application/x-amz-json-1.1' }, body: JSON.stringify({ __type: type, message }) };
}
