// A stand-in for a deployed API that keeps whole logs: the real request handler over the
// use cases' in-memory harness, served on 127.0.0.1, with a log reader a test writes into as
// a node's shipper would (a page is at most two lines, so a log takes several pages).

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { handleApiRequest } from '../../lib/http/index.ts';
import type { ControllerLogReader, JobLogPage, JobLogReader } from '../../lib/ports.ts';
import { isTerminal } from '../../lib/status.ts';
import type { JobView } from '../../lib/views.ts';
import { jobLogStreamConsoleUrl, jobLogStreamName, type JobLogStream } from '../../lib/job-log-names.ts';
import type { Harness } from './usecases-harness.ts';

/** Shipped lines by stream; a page is at most two lines, so a log takes several pages. */
export class ShippedLogs implements JobLogReader {
  readonly lines = new Map<string, string[]>();
  reads = 0;

  /**
   * With a region, streams have console pages, as a deployed stack's do; `served: false`
   * stands for an API from before the log route (it answers 404 there).
   */
  constructor(
    private readonly region?: string,
    readonly served = true,
  ) {}

  ship(stream: JobLogStream, ...lines: string[]): void {
    const name = jobLogStreamName(stream);
    this.lines.set(name, [...(this.lines.get(name) ?? []), ...lines]);
  }

  async read(stream: JobLogStream, position: string | null): Promise<JobLogPage> {
    this.reads += 1;
    const lines = this.lines.get(jobLogStreamName(stream)) ?? [];
    const at = position === null ? 0 : Number(position);
    const page = lines.slice(at, at + 2);
    return { text: page.map((line) => `${line}\n`).join(''), position: String(at + page.length) };
  }

  consoleUrl(stream: JobLogStream): string | null {
    return this.region === undefined ? null : jobLogStreamConsoleUrl({ region: this.region, namePrefix: 'relaunch', stream });
  }
}

export interface FakeApi {
  readonly url: string;
  readonly h: Harness;
  readonly logs: ShippedLogs;
  /** Resolves once a `GET /jobs/{id}` has answered a terminal status. */
  readonly endSeen: Promise<void>;
}

const servers: Server[] = [];

/** Serves the handler over `h` with `logs` (and `controllerLog`) on a free port of 127.0.0.1. */
export async function fakeApi(h: Harness, logs: ShippedLogs, controllerLog?: ControllerLogReader): Promise<FakeApi> {
  let sawEnd = () => undefined as void;
  const endSeen = new Promise<void>((resolve) => (sawEnd = resolve));
  const server = createServer((request, response) => {
    void (async () => {
      const chunks: Buffer[] = [];
      for await (const chunk of request) chunks.push(chunk as Buffer);
      const headers = Object.fromEntries(Object.entries(request.headers).map(([name, value]) => [name, Array.isArray(value) ? value.join(', ') : value]));
      const answer = await handleApiRequest(
        { method: request.method ?? 'GET', path: request.url ?? '/', headers, body: Buffer.concat(chunks).toString('utf8') },
        { ...h.deps, ...(logs.served ? { jobLogs: logs } : {}), ...(controllerLog === undefined ? {} : { controllerLog }) },
      );
      if (answer.statusCode === 200 && /^\/jobs\/[^/?]+$/.test(request.url ?? '') && isTerminal((JSON.parse(answer.body) as JobView).status)) sawEnd();
      response.writeHead(answer.statusCode, answer.headers).end(answer.body);
    })();
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, h, logs, endSeen };
}


/** Stops every fake API started. */
export async function closeFakeApis(): Promise<void> {
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
}
