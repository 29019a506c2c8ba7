// `relaunch dashboard`'s full log of an attempt (`GET /jobs/{id}/attempts/{n}/log`), for a
// deployed API: the page's "full log" link answered as the local runtime's page answers it,
// every node's setup and run output as text, read through the API's log pages (relayed and
// signed like the page's other calls).

import { isJobId } from '../lib/ids.ts';
import type { ApiResponse } from '../lib/http/types.ts';
import type { JobViewWithLogs, JobLogPageView } from '../lib/usecases/read-job-log.ts';
import { MAX_LOG_BYTES_PER_PHASE } from '../local/dashboard/page.ts';
import type { HttpJobsClient } from './jobs-client.ts';

/** The path of the page's full log of an attempt; its job id and attempt as written. */
export const ATTEMPT_LOG_PATH = /^\/jobs\/([^/?]+)\/attempts\/([^/?]+)\/log$/;

/** As the page's own answers: only text, never sniffed, framed or cached. */
const TEXT_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'text/plain; charset=utf-8',
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'cache-control': 'no-store',
};

function json(statusCode: number, body: unknown): ApiResponse {
  return { statusCode, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) };
}

/**
 * Every node's setup and run output of one attempt, node by node, each phase's first
 * MAX_LOG_BYTES_PER_PHASE bytes (with a note of the command that prints the rest). An API
 * that gives no log links (one that keeps only each phase's last lines) answers 404 as the
 * page expects.
 */
export async function deployedAttemptLog(client: Pick<HttpJobsClient, 'relay'>, jobId: string, attemptText: string): Promise<ApiResponse> {
  if (!isJobId(jobId)) return json(404, { error: `no job with id ${JSON.stringify(jobId.slice(0, 64))}` });
  if (!/^[1-9][0-9]{0,8}$/.test(attemptText)) {
    return json(400, { error: 'the request is not valid (1 issue)', issues: [{ path: 'attempt', message: `expected a positive integer in the path, got ${JSON.stringify(attemptText.slice(0, 40))}` }] });
  }
  const attempt = Number(attemptText);
  const job = await client.relay('GET', `/jobs/${encodeURIComponent(jobId)}`);
  if (job.status !== 200) return json(job.status, job.body);
  const streams = (job.body as JobViewWithLogs).logStreams;
  if (streams === undefined) {
    return json(404, { error: "this API keeps no full logs: each phase's last lines are on the job (GET /jobs/{id}, attempts[].outputTails)" });
  }
  const mine = streams.filter((stream) => stream.attempt === attempt);
  if (mine.length === 0) return json(404, { error: `job ${jobId} has no launched attempt ${attempt}` });
  const parts: string[] = [];
  for (const stream of mine) {
    const text = await readStream(client, jobId, attempt, stream.nodeRank, stream.phase);
    if (text === null) continue;
    parts.push(`==> node ${stream.nodeRank}, ${stream.phase} <==\n${text}${text.endsWith('\n') ? '' : '\n'}`);
  }
  const body = parts.length === 0 ? `(attempt ${attempt} wrote no output)\n` : parts.join('\n');
  return { statusCode: 200, headers: TEXT_HEADERS, body };
}

/** One log's pages from its start, up to MAX_LOG_BYTES_PER_PHASE; null when it is empty. */
async function readStream(client: Pick<HttpJobsClient, 'relay'>, jobId: string, attempt: number, nodeRank: number, phase: string): Promise<string | null> {
  let text = '';
  let cursor: string | undefined;
  for (;;) {
    const query = new URLSearchParams({ attempt: String(attempt), node: String(nodeRank), phase, ...(cursor === undefined ? {} : { cursor }) });
    const page = await client.relay('GET', `/jobs/${encodeURIComponent(jobId)}/logs?${query.toString()}`);
    if (page.status !== 200) return `${text}(the rest could not be read: the API answered ${page.status})\n`;
    const { text: more, cursor: next } = page.body as JobLogPageView;
    if (more === '') return text === '' ? null : text;
    text += more;
    cursor = next;
    if (Buffer.byteLength(text) >= MAX_LOG_BYTES_PER_PHASE) {
      return `${text}${text.endsWith('\n') ? '' : '\n'}(cut after ${Buffer.byteLength(text)} bytes: relaunch logs ${jobId} --attempt ${attempt} --node ${nodeRank} prints all of it)\n`;
    }
  }
}
