// X-Ray capture of the SDK clients: in Lambda with tracing on, each client the Lambdas build
// carries X-Ray's middleware (a subsegment per call); elsewhere clients are left untouched.

import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SFNClient } from '@aws-sdk/client-sfn';
import { afterEach, describe, expect, it, vi } from 'vitest';

/** X-Ray SDK's middleware on an SDK v3 client, as the middleware stack names it. */
const XRAY_MIDDLEWARE = /^XRaySDKInstrumentation\b/;

/** functions/shared/tracing.ts loaded afresh, so its tracer reads the environment as it is now. */
async function freshTracing(): Promise<typeof import('../../../../functions/shared/tracing.ts')> {
  vi.resetModules();
  return import('../../../../functions/shared/tracing.ts');
}

const middlewareOf = (client: DynamoDBClient | SFNClient) => client.middlewareStack.identify();

afterEach(() => {
  vi.unstubAllEnvs();
});

describe('traced', () => {
  it('adds X-Ray to a client in Lambda, where active tracing gives each invocation a trace', async () => {
    vi.stubEnv('AWS_EXECUTION_ENV', 'AWS_Lambda_nodejs22.x');
    vi.stubEnv('AWS_LAMBDA_FUNCTION_NAME', 'relaunch-test');
    const { traced, tracer } = await freshTracing();
    expect(tracer().isTracingEnabled()).toBe(true);
    for (const client of [new DynamoDBClient({ region: 'us-east-1' }), new SFNClient({ region: 'us-east-1' })]) {
      expect(middlewareOf(traced(client)).some((name) => XRAY_MIDDLEWARE.test(name))).toBe(true);
    }
  });

  it('leaves a client as it is outside Lambda, and when POWERTOOLS_TRACE_ENABLED is false', async () => {
    const outside = await freshTracing();
    expect(middlewareOf(outside.traced(new DynamoDBClient({ region: 'us-east-1' }))).some((name) => XRAY_MIDDLEWARE.test(name))).toBe(false);

    vi.stubEnv('AWS_EXECUTION_ENV', 'AWS_Lambda_nodejs22.x');
    vi.stubEnv('POWERTOOLS_TRACE_ENABLED', 'false');
    const off = await freshTracing();
    expect(middlewareOf(off.traced(new DynamoDBClient({ region: 'us-east-1' }))).some((name) => XRAY_MIDDLEWARE.test(name))).toBe(false);
  });
});
