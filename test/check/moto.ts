// moto_server for relaunch check's tests: started on 127.0.0.1 on a free port, waited for
// until it answers, stopped by its pid. Its request recorder tells what moto received, so
// a test can assert that check only ever read.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

/** Whether moto_server is on PATH (it is on every developer machine and CI; see TOOLING.md). */
export function motoInstalled(): boolean {
  return spawnSync('moto_server', ['--help'], { stdio: 'ignore' }).status === 0;
}

/** One request moto received: its service (from the SigV4 scope), operation and HTTP method. */
export interface RecordedCall {
  readonly service: string;
  /** The API operation (query `Action`, JSON `X-Amz-Target`); for S3's REST calls, the HTTP method and path. */
  readonly operation: string;
  readonly method: string;
}

/** A running moto_server. */
export interface Moto {
  /** `http://127.0.0.1:<port>`: every service answers here. */
  readonly endpoint: string;
  /** Forgets every resource (moto's reset). */
  reset(): Promise<void>;
  /** Forgets what was recorded and records from now on. */
  record(): Promise<void>;
  /** What moto received since `record()`. */
  recorded(): Promise<RecordedCall[]>;
  stop(): Promise<void>;
}

/** A port nothing listens on now (the kernel's pick). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/** Waits until moto answers its own API, or fails at once when the process ends first. */
async function answering(endpoint: string, child: ChildProcess, log: () => string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let exited = false;
  child.once('exit', () => (exited = true));
  for (;;) {
    if (exited) throw new Error(`moto_server exited before answering:\n${log()}`);
    try {
      const response = await fetch(`${endpoint}/moto-api/`);
      if (response.ok) return;
    } catch {
      // Not listening yet.
    }
    if (Date.now() > deadline) throw new Error(`moto_server did not answer within ${timeoutMs} ms:\n${log()}`);
    await sleep(50);
  }
}

/**
 * Starts moto_server. `env` reaches it (INITIAL_NO_AUTH_ACTION_COUNT turns IAM checks on
 * after that many requests). A port another process takes between the pick and the bind
 * makes moto exit: it is tried again on another port.
 */
export async function startMoto(options: { readonly env?: Readonly<Record<string, string>>; readonly timeoutMs?: number } = {}): Promise<Moto> {
  for (let tries = 1; ; tries += 1) {
    const port = await freePort();
    const endpoint = `http://127.0.0.1:${port}`;
    // moto writes its recording (moto_recording) in its working folder: one of its own.
    const folder = mkdtempSync(join(tmpdir(), 'relaunch-check-moto-'));
    const child = spawn('moto_server', ['-H', '127.0.0.1', '-p', String(port)], { cwd: folder, env: { ...process.env, ...options.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (log = (log + chunk).slice(-4000)));
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (log = (log + chunk).slice(-4000)));
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve())).then(() => rmSync(folder, { recursive: true, force: true }));
    try {
      await answering(endpoint, child, () => log, options.timeoutMs ?? 60_000);
    } catch (error) {
      child.kill('SIGKILL');
      await exited;
      if (tries < 3 && /Address already in use/.test(log)) continue;
      throw error;
    }
    const post = async (path: string) => {
      const response = await fetch(`${endpoint}${path}`, { method: 'POST' });
      if (!response.ok) throw new Error(`moto ${path} answered ${response.status}`);
    };
    return {
      endpoint,
      reset: () => post('/moto-api/reset'),
      record: async () => {
        await post('/moto-api/recorder/reset-recording');
        await post('/moto-api/recorder/start-recording');
      },
      recorded: async () => {
        const response = await fetch(`${endpoint}/moto-api/recorder/download-recording`);
        return parseRecording(await response.text());
      },
      stop: async () => {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
        await exited;
      },
    };
  }
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
