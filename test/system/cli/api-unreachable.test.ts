// A submit that cannot reach AWS is the caller's setup to fix, not a failed job: exit 2
// with the fix `relaunch check` would give (which credentials, which URL), never 1.

import { createServer as createHttpServer } from 'node:http';
import { createServer } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { killStrayClis, removeTempDirs, runCli, SLOW, tempDir, writeTask } from '../../support/cli.ts';

afterAll(async () => {
  killStrayClis();
  await removeTempDirs();
});

const TASK = 'name: hello\nrun: echo hello\n';

/** No credentials anywhere the default chain looks, and no instance metadata to wait on. */
const NO_CREDENTIALS: NodeJS.ProcessEnv = {
  AWS_ACCESS_KEY_ID: '',
  AWS_SECRET_ACCESS_KEY: '',
  AWS_SESSION_TOKEN: '',
  AWS_PROFILE: '',
  AWS_SHARED_CREDENTIALS_FILE: '/nonexistent/credentials',
  AWS_CONFIG_FILE: '/nonexistent/config',
  AWS_EC2_METADATA_DISABLED: 'true',
  AWS_CONTAINER_CREDENTIALS_RELATIVE_URI: '',
  AWS_CONTAINER_CREDENTIALS_FULL_URI: '',
  AWS_WEB_IDENTITY_TOKEN_FILE: '',
};

/** A loopback port nothing listens on: taken from the system, then let go. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('a submit that cannot reach AWS', { timeout: SLOW }, () => {
  it('exits 2 naming the URL and the fix when nothing answers there', async () => {
    const dir = await tempDir('unreachable');
    const task = await writeTask(dir, 'hello.yaml', TASK);
    const url = `http://127.0.0.1:${await closedPort()}`;

    const result = await runCli(['run', task, '--api', url], { cwd: dir });

    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(new RegExp(`^error: cannot reach ${url.replace(/\./g, '\\.')}: .+\n  fix: check the URL \\(--api, or RELAUNCH_API_URL: the stack's ApiUrl output`));
    expect(result.stderr).toContain('then relaunch check');
  });

  it('exits 2 saying no credentials were found, which chain was read, and how to configure them', async () => {
    const dir = await tempDir('no-credentials');
    const task = await writeTask(dir, 'hello.yaml', TASK);

    const result = await runCli(['run', task, '--api', 'https://abcdef1234.execute-api.us-east-1.amazonaws.com/prod'], { cwd: dir, env: NO_CREDENTIALS });

    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/^error: no AWS credentials to sign the API's requests with \(the default chain: environment, ~\/\.aws\/credentials and config, SSO, instance role\): /);
    expect(result.stderr).toContain('\n  fix: configure credentials (aws configure, aws sso login, or AWS_PROFILE) and check them with aws sts get-caller-identity; then relaunch check');
  });

  it('exits 2 saying the API refused these credentials, and whose to use, when it answers 403', async () => {
    const dir = await tempDir('refused');
    const task = await writeTask(dir, 'hello.yaml', TASK);
    // As API Gateway answers a caller IAM does not allow execute-api:Invoke.
    const api = createHttpServer((_request, response) => {
      response.writeHead(403, { 'content-type': 'application/json' }).end(JSON.stringify({ message: 'User: arn:aws:iam::123456789012:user/dev is not authorized to perform: execute-api:Invoke' }));
    });
    await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = api.address() as { port: number };
      const result = await runCli(['run', task, '--api', `http://127.0.0.1:${port}`], { cwd: dir });

      expect(result.code).toBe(2);
      expect(result.stderr).toMatch(/^error: the API answered 403: .* \(the API refused these credentials\)\n {2}fix: use credentials allowed execute-api:Invoke on this API/);
    } finally {
      await new Promise<void>((resolve) => api.close(() => resolve()));
    }
  });
});
