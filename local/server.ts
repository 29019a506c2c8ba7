// The local REST API: the same routes and handlers as API Gateway (lib/http), served on
// 127.0.0.1 over a LocalRuntime. Whoever runs a runtime serves it, and says where in
// `<dataDir>/server.json`, so other commands on the same data folder can reach it.

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { rmSync, writeFileSync } from 'node:fs';
import { handleApiRequest, INTERNAL_ERROR_MESSAGE, MAX_BODY_BYTES } from '../lib/http/index.ts';
import type { LocalRuntime } from './runtime.ts';
import { serverInfoPath, type ServerInfo } from './server-info.ts';



/** An HTTP server answering the REST API from a runtime. */
export class LocalApiServer {
  private constructor(
    private readonly server: http.Server,
    readonly url: string,
    private readonly infoFile: string,
  ) {}

  /** Listens on 127.0.0.1 (port 0: any free one) and records itself in server.json. */
  static async start(runtime: LocalRuntime, options: { port?: number; onError?: (error: unknown) => void } = {}): Promise<LocalApiServer> {
    const server = http.createServer((req, res) => {
      void answer(runtime, req, res, options.onError);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
    });
    const { port } = server.address() as AddressInfo;
    const url = `http://127.0.0.1:${port}`;
    const infoFile = serverInfoPath(runtime.dataDir);
    const info: ServerInfo = { url, pid: process.pid };
    writeFileSync(infoFile, `${JSON.stringify(info)}\n`);
    return new LocalApiServer(server, url, infoFile);
  }

  /** Stops listening and removes server.json. */
  async close(): Promise<void> {
    rmSync(this.infoFile, { force: true });
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

async function answer(
  runtime: LocalRuntime,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  onError?: (error: unknown) => void,
): Promise<void> {
  try {
    const body = await readBody(req);
    if (body === null) {
      res.writeHead(413, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: `the body is larger than ${MAX_BODY_BYTES} bytes` }));
      return;
    }
    const response = await handleApiRequest(
      { method: req.method ?? 'GET', path: req.url ?? '/', headers: flatHeaders(req.headers), body },
      { ...runtime.deps, onUnexpectedError: onError },
    );
    res.writeHead(response.statusCode, { 'content-type': 'application/json', ...response.headers });
    res.end(response.body);
  } catch (error) {
    onError?.(error);
    if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: INTERNAL_ERROR_MESSAGE }));
  }
}

/** The body as text, or null when it is over the API's limit (the rest is read and dropped). */
function readBody(req: http.IncomingMessage): Promise<string | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) chunks.push(chunk);
    });
    req.on('end', () => resolve(size > MAX_BODY_BYTES ? null : Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function flatHeaders(headers: http.IncomingHttpHeaders): Record<string, string | undefined> {
  return Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : v]));
}
