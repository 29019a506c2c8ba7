// moto_server as a test fixture: a second implementation of the AWS APIs, started on
// 127.0.0.1 on a free port, waited for until it answers, reset between tests when a test
// asks, and stopped (its whole process group) when done. One port serves every service.
// Its request recorder tells what moto received, so a test can assert what was sent
// (relaunch check's: only reads).
//
// Nothing here reaches beyond 127.0.0.1: `awsEnvironment` points every SDK client at the
// server through AWS_ENDPOINT_URL, with dummy credentials and IMDS turned off, so no SDK
// default (a credentials provider, an endpoint) looks elsewhere.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** The one command that installs what `npm run test:aws` needs. */
export const INSTALL_COMMAND = 'pip install "moto[server]" cfn-lint';

/** The account moto answers as, whatever credentials sign the request. */
export const MOTO_ACCOUNT = '123456789012';

/** A running moto_server. */
export interface Moto {
  /** `http://127.0.0.1:PORT`. */
  readonly endpoint: string;
  readonly port: number;
  /** Forgets every resource of every service (POST /moto-api/reset). */
  reset(): Promise<void>;
  /** Forgets what was recorded and records every request from now on. */
  record(): Promise<void>;
  /** What moto received since `record()`. */
  recorded(): Promise<RecordedCall[]>;
  /** Stops the server and waits for it to exit. */
  stop(): Promise<void>;
}

/** One request moto received: its service (from the SigV4 scope), operation and HTTP method. */
export interface RecordedCall {
  readonly service: string;
  /** The API operation (query `Action`, JSON `X-Amz-Target`); for S3's REST calls, the HTTP method and path. */
  readonly operation: string;
  readonly method: string;
}

/** Options of startMoto. */
export interface StartMotoOptions {
  /**
   * How long to wait for the server to answer its first request. A deadline for a server
   * that hangs, not a pace: startMoto returns as soon as it answers.
   * @default 60_000
   */
  readonly readyWithinMs?: number;
  /** Extra environment for the server (moto reads some settings from it). */
  readonly env?: Readonly<Record<string, string>>;
}

/**
 * Throws, naming the command that installs them, when `moto_server` or `cfn-lint` is not
 * on PATH (or does not run).
 */
export function requireAwsTools(): void {
  const missing = [
    ['moto_server', ['--help']],
    ['cfn-lint', ['--version']],
  ].filter(([command, args]) => spawnSync(command as string, args as string[], { stdio: 'ignore', timeout: 60_000 }).status !== 0);
  if (missing.length > 0) {
    throw new Error(`${missing.map(([command]) => command).join(' and ')} not found on PATH; install them with: ${INSTALL_COMMAND}`);
  }
}

/** Starts moto_server on a free port of 127.0.0.1 and returns once it answers. */
export async function startMoto(options: StartMotoOptions = {}): Promise<Moto> {
  // A port found free can be taken before moto binds it: then moto exits, and another is tried.
  for (let tries = 1; ; tries += 1) {
    const port = await freePort();
    try {
      return await startOn(port, options);
    } catch (error) {
      if (!(error instanceof PortTakenError) || tries >= 5) throw error;
    }
  }
}

class PortTakenError extends Error {
  override readonly name = 'PortTakenError';
}

async function startOn(port: number, options: StartMotoOptions): Promise<Moto> {
  const endpoint = `http://127.0.0.1:${port}`;
  // moto writes its recording (moto_recording) in its working folder: one of its own.
  const folder = mkdtempSync(join(tmpdir(), 'relaunch-moto-'));
  // Its own process group, so that stop() ends whatever the server started, by its id.
  const child = spawn('moto_server', ['-H', '127.0.0.1', '-p', String(port)], {
    cwd: folder,
    detached: true,
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, ...options.env },
  });
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-4000);
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code))).then((code) => {
    rmSync(folder, { recursive: true, force: true });
    return code;
  });
  const spawnFailed = new Promise<never>((_, reject) =>
    child.once('error', (error) => reject(new Error(`moto_server could not start (${error.message}); install it with: ${INSTALL_COMMAND}`))),
  );
  const deadline = Date.now() + (options.readyWithinMs ?? 60_000);
  const ready = (async () => {
    for (;;) {
      if (await answers(endpoint)) return;
      if (Date.now() > deadline) throw new Error(`moto_server on ${endpoint} did not answer within ${options.readyWithinMs ?? 60_000} ms:\n${stderr}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  })();
  const died = exited.then((code) => {
    if (/address already in use/i.test(stderr)) throw new PortTakenError(`port ${port} was taken`);
    throw new Error(`moto_server exited with code ${code} before answering:\n${stderr}`);
  });
  try {
    await Promise.race([ready, died, spawnFailed]);
  } catch (error) {
    await stopProcess(child, exited);
    throw error;
  }
  const post = async (path: string): Promise<void> => {
    const response = await fetch(`${endpoint}${path}`, { method: 'POST' });
    if (!response.ok) throw new Error(`moto_server ${path} answered ${response.status}`);
  };
  return {
    endpoint,
    port,
    reset: () => post('/moto-api/reset'),
    record: async () => {
      await post('/moto-api/recorder/reset-recording');
      await post('/moto-api/recorder/start-recording');
    },
    recorded: async () => {
      const response = await fetch(`${endpoint}/moto-api/recorder/download-recording`);
      return parseRecording(await response.text());
    },
    stop: () => stopProcess(child, exited),
  };
}

/** moto's recording: one JSON object per line (headers, method, url, body, base64 when `body_encoded`). */
export function parseRecording(text: string): RecordedCall[] {
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const entry = JSON.parse(line) as { headers: Record<string, string>; method: string; url: string; body: string | null; body_encoded?: boolean };
      const headers = Object.fromEntries(Object.entries(entry.headers).map(([key, value]) => [key.toLowerCase(), value]));
      const service = /Credential=[^/]+\/[^/]+\/[^/]+\/([^/]+)\//.exec(headers.authorization ?? '')?.[1] ?? 'unsigned';
      const body = entry.body === null ? '' : entry.body_encoded === true ? Buffer.from(entry.body, 'base64').toString('utf8') : entry.body;
      const target = headers['x-amz-target'];
      const action = new URLSearchParams(body).get('Action');
      const operation = target !== undefined ? (target.split('.').at(-1) ?? target) : action !== null ? action : `${entry.method} ${new URL(entry.url).pathname}`;
      return { service, operation, method: entry.method };
    });
}

/** Whether a recorded call only reads: a Describe/Get/List/Head operation, or an S3 GET or HEAD. */
export function isRead(call: RecordedCall): boolean {
  if (/^(Describe|Get|List|Head)/.test(call.operation)) return true;
  return call.service === 's3' && (call.method === 'GET' || call.method === 'HEAD');
}

/** Whether the server answers HTTP at all yet. */
async function answers(endpoint: string): Promise<boolean> {
  try {
    const response = await fetch(`${endpoint}/moto-api/data.json`, { signal: AbortSignal.timeout(5_000) });
    await response.arrayBuffer();
    return response.ok;
  } catch {
    return false;
  }
}

/** TERM to the server's group, KILL if it has not gone 5 s later; resolves once it has exited. */
async function stopProcess(child: ChildProcess, exited: Promise<unknown>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  const group = -child.pid;
  signal(group, 'SIGTERM');
  const timer = setTimeout(() => signal(group, 'SIGKILL'), 5_000);
  await exited;
  clearTimeout(timer);
}

function signal(group: number, name: NodeJS.Signals): void {
  try {
    process.kill(group, name);
  } catch {
    // Already gone.
  }
}

/** A TCP port nothing listens on right now. */
async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address !== null ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/**
 * What every SDK client in the process needs to reach moto and nothing else: its
 * endpoint for every service, dummy credentials, a region, and no instance metadata.
 * Returns a function that restores the variables as they were.
 */
export function useMotoEnvironment(moto: Moto, region = 'us-east-1'): () => void {
  const values: Record<string, string> = {
    AWS_ENDPOINT_URL: moto.endpoint,
    AWS_ACCESS_KEY_ID: 'testing',
    AWS_SECRET_ACCESS_KEY: 'testing',
    AWS_REGION: region,
    AWS_DEFAULT_REGION: region,
    AWS_EC2_METADATA_DISABLED: 'true',
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
  };
  const before = Object.fromEntries(Object.keys(values).map((key) => [key, process.env[key]]));
  // Variables that would send a client elsewhere or to another identity.
  for (const key of ['AWS_SESSION_TOKEN', 'AWS_PROFILE', 'AWS_CONTAINER_CREDENTIALS_FULL_URI', 'AWS_CONTAINER_CREDENTIALS_RELATIVE_URI', 'AWS_WEB_IDENTITY_TOKEN_FILE']) {
    before[key] = process.env[key];
    delete process.env[key];
  }
  Object.assign(process.env, values);
  return () => {
    for (const [key, value] of Object.entries(before)) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
  };
}
