// Where a command's jobs live: an in-process local runtime, a local runtime another
// process serves, or a deployed stack's REST API (SigV4-signed with the default AWS
// credentials). Every command speaks to one of these through the same small interface.

import { createHash, createHmac, type Hash, type Hmac } from 'node:crypto';
import { defaultProvider } from '@aws-sdk/credential-provider-node';
import { SignatureV4 } from '@smithy/signature-v4';
import { parseDocument } from 'yaml';
import {
  InvalidInputError,
  InvalidTaskSpecError,
  JobNotFoundError,
  RelaunchError,
  type InputIssue,
} from '../lib/errors.ts';
import type { JobEvent } from '../lib/model.ts';
import type { SpecWarning } from '../lib/spec/types.ts';
import { cancelJob, getJob, listJobs } from '../lib/usecases/index.ts';
import type { JobSummary, JobView } from '../lib/views.ts';
import type { LocalRuntime, LocalSubmitOptions } from '../local/runtime.ts';

/** What the commands need from wherever the jobs are. */
export interface JobsClient {
  /** Where it is, for messages: `local`, or the API's URL. */
  readonly where: string;
  /** The local data folder whose logs this client's jobs write, when there is one. */
  readonly dataDir: string | null;
  submit(body: string, options: LocalSubmitOptions): Promise<{ jobId: string; warnings: readonly SpecWarning[] }>;
  getJob(jobId: string): Promise<JobView>;
  listJobs(): Promise<JobSummary[]>;
  cancel(jobId: string): Promise<{ status: string }>;
  /** The job's audit trail, oldest first, where the client can read it (not over the API). */
  listEvents?(jobId: string): Promise<JobEvent[]>;
}

/** The runtime in this process. */
export class InProcessJobsClient implements JobsClient {
  readonly where = 'local';
  readonly dataDir: string;

  constructor(private readonly runtime: LocalRuntime) {
    this.dataDir = runtime.dataDir;
  }

  submit(body: string, options: LocalSubmitOptions): Promise<{ jobId: string; warnings: readonly SpecWarning[] }> {
    return this.runtime.submit(body, options);
  }

  getJob(jobId: string): Promise<JobView> {
    return getJob(jobId, this.runtime.deps);
  }

  async listJobs(): Promise<JobSummary[]> {
    return (await listJobs(this.runtime.deps)).jobs;
  }

  cancel(jobId: string): Promise<{ status: string }> {
    return cancelJob(jobId, this.runtime.deps);
  }

  listEvents(jobId: string): Promise<JobEvent[]> {
    return this.runtime.deps.store.listEvents(jobId);
  }
}

/** An error the API answered, with its status code. */
export class ApiError extends RelaunchError {
  override readonly name = 'ApiError';
  constructor(
    readonly statusCode: number,
    message: string,
  ) {
    super(message);
  }
}

/** The REST API of DESIGN.md section 6, local (`relaunch serve`) or deployed. */
export class HttpJobsClient implements JobsClient {
  private readonly signer: SignatureV4 | null;

  constructor(
    readonly where: string,
    options: { dataDir?: string | null; sign?: boolean } = {},
  ) {
    this.dataDir = options.dataDir ?? null;
    this.signer = options.sign === true ? newSigner(new URL(where)) : null;
  }

  readonly dataDir: string | null;

  async submit(body: string, options: LocalSubmitOptions): Promise<{ jobId: string; warnings: readonly SpecWarning[] }> {
    // The API takes only the task: faults would be dropped without a word.
    if ((options.chaos?.faults ?? []).length > 0) {
      throw new InvalidInputError([
        {
          path: '--chaos',
          message:
            'chaos (--chaos, --preempt-attempts) applies only to a runtime in this process or one given it by `relaunch serve --chaos`, not to a job submitted through an API',
        },
      ]);
    }
    const text = withEnvOverrides(body, options.envOverrides ?? {});
    return (await this.request('POST', '/jobs', text, 'application/yaml')) as { jobId: string; warnings: SpecWarning[] };
  }

  async getJob(jobId: string): Promise<JobView> {
    return (await this.request('GET', `/jobs/${encodeURIComponent(jobId)}`)) as JobView;
  }

  async listJobs(): Promise<JobSummary[]> {
    return ((await this.request('GET', '/jobs')) as { jobs: JobSummary[] }).jobs;
  }

  async cancel(jobId: string): Promise<{ status: string }> {
    return (await this.request('DELETE', `/jobs/${encodeURIComponent(jobId)}`)) as { status: string };
  }

  private async request(method: string, path: string, body?: string, contentType?: string): Promise<unknown> {
    const url = new URL(`${this.where.replace(/\/+$/, '')}${path}`);
    let headers: Record<string, string> = { host: url.host, ...(contentType === undefined ? {} : { 'content-type': contentType }) };
    if (this.signer !== null) {
      const signed = await this.signer.sign({
        method,
        protocol: url.protocol,
        hostname: url.hostname,
        path: url.pathname,
        headers,
        body,
      });
      headers = signed.headers as Record<string, string>;
    }
    let response: Response;
    try {
      response = await fetch(url, { method, headers, body });
    } catch (error) {
      throw new ApiError(0, `cannot reach ${this.where}: ${(error as Error).message}`);
    }
    const text = await response.text();
    const parsed = parseJson(text);
    if (response.ok) return parsed;
    throw apiError(response.status, parsed, path);
  }
}

/**
 * The task with `--env` values written into its `envs`, for an API that takes only the
 * task. The CLI checks the file itself first, so errors keep the file's line numbers.
 */
function withEnvOverrides(body: string, overrides: Readonly<Record<string, string>>): string {
  const entries = Object.entries(overrides);
  if (entries.length === 0) return body;
  const doc = parseDocument(body);
  if (doc.errors.length > 0) return body;
  for (const [key, value] of entries) doc.setIn(['envs', key], value);
  return doc.toString();
}

/** The error a failed API call stands for, so the CLI maps it to the same exit status as locally. */
function apiError(status: number, body: unknown, path: string): Error {
  const { error, issues } = (body ?? {}) as { error?: string; issues?: InputIssue[] };
  if (status === 400 && Array.isArray(issues)) return new InvalidTaskSpecError(issues);
  if (status === 404 && path.startsWith('/jobs/')) return new JobNotFoundError(decodeURIComponent(path.slice('/jobs/'.length)));
  return new ApiError(status, `the API answered ${status}: ${error ?? 'no message'}`);
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return { error: text.slice(0, 200) };
  }
}

/** SigV4 for API Gateway (service `execute-api`), region read from the URL's host. */
function newSigner(url: URL): SignatureV4 {
  const region = /\.execute-api\.([a-z0-9-]+)\.amazonaws\.com$/.exec(url.hostname)?.[1] ?? process.env.AWS_REGION ?? 'us-east-1';
  return new SignatureV4({ service: 'execute-api', region, credentials: defaultProvider(), sha256: NodeSha256 });
}

/** The hash SignatureV4 asks for (plain, or HMAC when given a secret), from node:crypto. */
class NodeSha256 {
  private readonly hash: Hash | Hmac;

  constructor(secret?: string | ArrayBuffer | ArrayBufferView) {
    this.hash = secret === undefined ? createHash('sha256') : createHmac('sha256', bytes(secret));
  }

  update(data: string | ArrayBuffer | ArrayBufferView): void {
    this.hash.update(bytes(data));
  }

  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.hash.digest());
  }
}

function bytes(data: string | ArrayBuffer | ArrayBufferView): string | Uint8Array {
  if (typeof data === 'string') return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}
