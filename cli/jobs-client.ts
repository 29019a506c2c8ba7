// Where a command's jobs live: an in-process local runtime, a local runtime another
// process serves, or a deployed stack's REST API (SigV4-signed with the default AWS
// credentials). Every command speaks to one of these through the same small interface.

import type { SourcesLocation } from '../lib/http/types.ts';
import { createHash, createHmac, randomUUID, type Hash, type Hmac } from 'node:crypto';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { defaultProvider } from '@aws-sdk/credential-provider-node';
import { SignatureV4 } from '@smithy/signature-v4';
import { isMap, isScalar, parseAllDocuments, type Scalar } from 'yaml';
import {
  InvalidInputError,
  InvalidTaskSpecError,
  JobNotFoundError,
  RelaunchError,
  type InputIssue,
} from '../lib/errors.ts';
import { IDEMPOTENCY_KEY_HEADER } from '../lib/http/idempotency-key.ts';
import type { JobEvent } from '../lib/model.ts';
import { isPipelineHeader } from '../lib/task-file/parse.ts';
import type { SpecWarning } from '../lib/task-file/types.ts';
import { cancelJob, getJob, listJobs } from '../lib/usecases/index.ts';
import { readJobLog, type ControllerLogView, type JobLogPageView } from '../lib/usecases/read-job-log.ts';
import type { ShippedPhase } from '../lib/job-log-names.ts';
import { FileJobLogs } from '../local/file-job-logs.ts';
import type { JobSummary, JobView } from '../lib/views.ts';
import type { LocalRuntime, LocalSubmitOptions } from '../local/runtime.ts';
import { chaosFileText, LOCAL_EVENTS_PREFIX, LOCAL_SUBMIT_PATH, type LocalSubmitBody } from '../local/local-routes.ts';
import { hasChaos } from '../local/chaos.ts';
import { SubmitRecord, submissionFingerprint } from './submit-record.ts';

/**
 * How a client paces its calls. A deployed API's stage throttle is shared with the
 * agents' heartbeats: a follower that polled it every 200 ms could starve them.
 */
export interface Pacing {
  /** `relaunch run` and `logs` poll a job this often while it changes... */
  readonly pollMinMs: number;
  /** ...and back off to this while it does not (see follow.ts `pollDelayMs`). */
  readonly pollMaxMs: number;
  /** Tries of one call that was throttled (429), not served (5xx) or not answered; 1: none again. */
  readonly tries: number;
}

/**
 * A runtime in this process, or one `relaunch serve` runs: nothing throttles it, but each
 * read costs it CPU (several store queries and a view), so a job that does not change is
 * read once a second (BENCHMARKS.md, "The test suite").
 */
export const LOCAL_PACING: Pacing = { pollMinMs: 200, pollMaxMs: 1000, tries: 1 };
/** A deployed API (API Gateway): polls every 2-5 s, and a refused call is tried again. */
export const DEPLOYED_PACING: Pacing = { pollMinMs: 2000, pollMaxMs: 5000, tries: 5 };

/** The longest Retry-After a client honours; a longer one is cut to this. */
export const MAX_RETRY_AFTER_MS = 60_000;
/** The first wait before a retry the API gave no Retry-After for; it doubles with each try. */
const RETRY_BASE_MS = 1000;

/** What the commands need from wherever the jobs are. */
export interface JobsClient {
  /** Where it is, for messages: `local`, or the API's URL. */
  readonly where: string;
  /** How often to poll it, and whether to retry what it refuses. */
  readonly pacing: Pacing;
  /** The local data folder whose logs this client's jobs write, when there is one. */
  readonly dataDir: string | null;
  submit(body: string, options: LocalSubmitOptions): Promise<{ jobId: string; warnings: readonly SpecWarning[] }>;
  getJob(jobId: string): Promise<JobView>;
  listJobs(): Promise<JobSummary[]>;
  cancel(jobId: string): Promise<{ status: string }>;
  /** The job's audit trail, oldest first, where the client can read it (not over the API). */
  listEvents?(jobId: string): Promise<JobEvent[]>;
  /** A page of one node's output of one phase (`GET /jobs/{id}/logs`), from a page's cursor or the start. */
  readLog?(jobId: string, query: LogQuery): Promise<JobLogPageView>;
  /**
   * The lines the controller's functions logged about the job, where they run apart from
   * the API (a deployed stack); null where they do not (a local runtime: its status changes say it).
   */
  controllerLog?(jobId: string): Promise<ControllerLogView | null>;
}

/** Which output `readLog` reads, and from where. */
export interface LogQuery {
  readonly attempt: number;
  readonly nodeRank: number;
  readonly phase: ShippedPhase;
  readonly cursor?: string | undefined;
}

/** The runtime in this process. */
export class InProcessJobsClient implements JobsClient {
  readonly where = 'local';
  readonly pacing = LOCAL_PACING;
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

  readLog(jobId: string, query: LogQuery): Promise<JobLogPageView> {
    return readJobLog({ jobId, ...query }, { store: this.runtime.deps.store, jobLogs: new FileJobLogs(this.dataDir) });
  }

  async controllerLog(): Promise<null> {
    return null;
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

/**
 * A local runtime that does not answer within this long is said to be not answering, unless
 * RELAUNCH_RUNTIME_WAIT_SECONDS says otherwise: generous to a runtime that is only busy
 * (a command's calls do not queue behind the agents' calls, which are bounded apart), and
 * short of the five minutes a person would wait before giving up on a silent command.
 */
export const DEFAULT_RUNTIME_WAIT_MS = 60_000;

/** The environment variable that sets how long a command waits for a local runtime's answer. */
export const RUNTIME_WAIT_VARIABLE = 'RELAUNCH_RUNTIME_WAIT_SECONDS';

/**
 * How long a command waits for a local runtime's answer: RELAUNCH_RUNTIME_WAIT_SECONDS
 * (seconds, fractions allowed), else DEFAULT_RUNTIME_WAIT_MS.
 *
 * @throws InvalidInputError naming the variable when it is not a positive number of seconds.
 */
export function runtimeWaitMs(environment: NodeJS.ProcessEnv = process.env): number {
  const text = environment[RUNTIME_WAIT_VARIABLE];
  if (text === undefined || text === '') return DEFAULT_RUNTIME_WAIT_MS;
  const seconds = Number(text);
  if (!/^[0-9]+(\.[0-9]+)?$/.test(text.trim()) || !(seconds > 0) || seconds > 86_400) {
    throw new InvalidInputError([{ path: RUNTIME_WAIT_VARIABLE, message: `expected a number of seconds from 0.001 to 86400, got "${text.slice(0, 40)}"` }]);
  }
  return Math.ceil(seconds * 1000);
}

/** A local runtime's process, as a client names it when it does not answer. */
export interface LocalRuntimeProcess {
  readonly pid: number;
  /** How long to wait for each answer before saying it is not answering. @default runtimeWaitMs() */
  readonly answerWithinMs?: number;
}

/** The local runtime a command talks to did not answer in time (stopped, or overwhelmed). */
export class RuntimeNotAnsweringError extends RelaunchError {
  override readonly name = 'RuntimeNotAnsweringError';
  constructor(
    readonly pid: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Nothing answers where the local runtime a command talks to served (it exited, crashed or
 * was killed): not an API whose URL to fix, so not an ApiError. A submit takes it as the
 * runtime gone and opens the folder again, which starts another.
 */
export class LocalRuntimeGoneError extends RelaunchError {
  override readonly name = 'LocalRuntimeGoneError';
  constructor(
    readonly pid: number,
    message: string,
  ) {
    super(message);
  }
}

/** How an HttpJobsClient is set up; everything but the URL is optional. */
export interface HttpJobsClientOptions {
  /** The local data folder whose logs the jobs write (`relaunch serve` on this machine). */
  readonly dataDir?: string | null;
  /**
   * The local runtime's process, for a runtime on this machine (with `dataDir`): its
   * answers are waited for a bounded time, its submits take chaos and keep their key in
   * the data folder, and a job's status changes are read from it.
   */
  readonly local?: LocalRuntimeProcess;
  /** Sign requests with SigV4 and the default AWS credentials (a deployed API). */
  readonly sign?: boolean;
  /**
   * How to pace calls.
   * @default DEPLOYED_PACING when signing, else LOCAL_PACING
   */
  readonly pacing?: Pacing;
  /**
   * Waits before a retry; injected so tests need not wait.
   * @default node:timers/promises setTimeout
   */
  readonly sleep?: (ms: number) => Promise<unknown>;
  /**
   * A uniform draw in [0, 1), for the retries' jitter.
   * @default Math.random
   */
  readonly random?: () => number;
}

/** The REST API of DESIGN.md section 6, local (`relaunch serve`) or deployed. */
export class HttpJobsClient implements JobsClient {
  private readonly signer: SignatureV4 | null;
  private readonly sleep: (ms: number) => Promise<unknown>;
  private readonly random: () => number;
  readonly dataDir: string | null;
  readonly pacing: Pacing;
  private readonly local: { readonly pid: number; readonly answerWithinMs: number; readonly dataDir: string } | null;
  /** A job's status changes, from a local runtime (absent for a deployed API, which serves none). */
  readonly listEvents?: (jobId: string) => Promise<JobEvent[]>;

  constructor(
    readonly where: string,
    options: HttpJobsClientOptions = {},
  ) {
    this.dataDir = options.dataDir ?? null;
    this.local =
      options.local === undefined || this.dataDir === null
        ? null
        : { pid: options.local.pid, answerWithinMs: options.local.answerWithinMs ?? runtimeWaitMs(), dataDir: this.dataDir };
    if (this.local !== null) {
      this.listEvents = async (jobId) => ((await this.request('GET', `${LOCAL_EVENTS_PREFIX}${encodeURIComponent(jobId)}`)) as { events: JobEvent[] }).events;
    }
    this.signer = options.sign === true ? newSigner(new URL(where)) : null;
    this.pacing = options.pacing ?? (options.sign === true ? DEPLOYED_PACING : LOCAL_PACING);
    this.sleep = options.sleep ?? ((ms) => sleep(ms));
    this.random = options.random ?? Math.random;
  }

  async submit(body: string, options: LocalSubmitOptions): Promise<{ jobId: string; warnings: readonly SpecWarning[] }> {
    if (this.local !== null) return this.submitLocally(body, options, this.local.dataDir);
    // The API takes only the task: faults (and a boot) would be dropped without a word.
    if (hasChaos(options.chaos)) {
      throw new InvalidInputError([
        {
          path: '--chaos',
          message:
            'chaos (--chaos, --preempt-attempts, --boot) applies only to a runtime in this process or one given it by `relaunch serve --chaos`, not to a job submitted through an API',
        },
      ]);
    }
    const text = withOverrides(body, { envs: options.envOverrides ?? {}, secrets: options.secretOverrides ?? {} });
    // One key per submit, sent again with each retry: a retry after an answer that was
    // lost on the way back gets the job the first try made, not a second one.
    const headers = { 'content-type': 'application/yaml', [IDEMPOTENCY_KEY_HEADER.toLowerCase()]: randomUUID() };
    return (await this.request('POST', '/jobs', text, headers)) as { jobId: string; warnings: SpecWarning[] };
  }

  /**
   * A submit to a local runtime, with what only it takes, under a key kept in the data
   * folder (submit-record.ts): a submit this command gives up on is made once at most, and
   * running the same command again gets its job.
   */
  private async submitLocally(task: string, options: LocalSubmitOptions, dataDir: string): Promise<{ jobId: string; warnings: readonly SpecWarning[] }> {
    const body: LocalSubmitBody = {
      task,
      envOverrides: options.envOverrides ?? {},
      secretOverrides: options.secretOverrides ?? {},
      chaos: hasChaos(options.chaos) ? chaosFileText(options.chaos ?? { faults: [] }) : null,
    };
    // Secrets count by their hash: the record in the data folder never holds one.
    const fingerprint = submissionFingerprint({ ...body, secretOverrides: submissionFingerprint(body.secretOverrides) });
    const record = SubmitRecord.begin(dataDir, fingerprint);
    const headers = { 'content-type': 'application/json', [IDEMPOTENCY_KEY_HEADER.toLowerCase()]: record.key };
    let answer: Answer;
    try {
      answer = await this.finalAnswer('POST', LOCAL_SUBMIT_PATH, JSON.stringify(body), headers);
    } catch (error) {
      record.abandon();
      if (error instanceof RuntimeNotAnsweringError) {
        throw new RuntimeNotAnsweringError(
          error.pid,
          `${error.message}. The job may still be made when it answers again (relaunch status lists it): running this same command again submits it under the same key, so it is made once`,
        );
      }
      throw error;
    }
    record.answered();
    if (!answer.ok) throw apiError(answer.status, answer.body, LOCAL_SUBMIT_PATH);
    return answer.body as { jobId: string; warnings: SpecWarning[] };
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

  async readLog(jobId: string, query: LogQuery): Promise<JobLogPageView> {
    const params = new URLSearchParams({ attempt: String(query.attempt), node: String(query.nodeRank), phase: query.phase });
    if (query.cursor !== undefined) params.set('cursor', query.cursor);
    return (await this.request('GET', `/jobs/${encodeURIComponent(jobId)}/logs?${params.toString()}`)) as JobLogPageView;
  }

  /** Null when the API answers that its controller runs in its own process (`relaunch serve`). */
  async controllerLog(jobId: string): Promise<ControllerLogView | null> {
    const path = `/jobs/${encodeURIComponent(jobId)}/controller-log`;
    const { status, body } = await this.relay('GET', path);
    if (status === 200) return body as ControllerLogView;
    // A job that exists (the caller read it) and a 404, or API Gateway's 403 for a route its
    // stack does not have (one deployed before this route): this API serves no controller log.
    if ((status === 404 || status === 403) && !/^no job with id/.test(((body ?? {}) as { error?: string }).error ?? '')) return null;
    throw apiError(status, body, path);
  }

  /** Where `run` uploads local sources for this API (`GET /sources`). */
  async sourcesLocation(): Promise<SourcesLocation> {
    return (await this.request('GET', '/sources')) as SourcesLocation;
  }

  /**
   * One call, tried up to `pacing.tries` times while the API throttles it, cannot serve it
   * or does not answer (`retryDelayMs` says how long to wait). Every call is safe to repeat:
   * reads, a cancel, and a submit that carries its idempotency key on every try.
   */
  private async request(method: string, path: string, body?: string, headers: Readonly<Record<string, string>> = {}): Promise<unknown> {
    const answer = await this.finalAnswer(method, path, body, headers);
    if (answer.ok) return answer.body;
    throw apiError(answer.status, answer.body, path);
  }

  /**
   * One read or cancel as the API answered it, status and body, signed and retried as
   * every call is: for `relaunch dashboard`, which hands the answer to its page as it is.
   */
  async relay(method: 'GET' | 'DELETE', path: string): Promise<{ status: number; body: unknown }> {
    const { status, body } = await this.finalAnswer(method, path, undefined, {});
    return { status, body };
  }

  /** The answer once no more tries are due (see `request`); nothing answering at all is an ApiError of status 0. */
  private async finalAnswer(method: string, path: string, body: string | undefined, headers: Readonly<Record<string, string>>): Promise<Answer> {
    for (let tryNumber = 1; ; tryNumber += 1) {
      const answer = await this.send(method, path, body, headers);
      const delay = tryNumber < this.pacing.tries ? retryDelayMs(answer, tryNumber, Date.now(), this.random) : null;
      if (delay === null) {
        if (answer.status === 0) {
          // A local runtime that went (crashed, killed) is not an API to fix the URL of: say which process, and where it wrote why.
          if (this.local !== null) {
            throw new LocalRuntimeGoneError(this.local.pid, `the local runtime of ${this.local.dataDir} (pid ${this.local.pid}) cannot be reached at ${this.where}: ${answer.failure}; what it wrote last is in ${join(this.local.dataDir, 'runtime.log')}`);
          }
          throw new ApiError(0, `cannot reach ${this.where}: ${answer.failure}`);
        }
        return answer;
      }
      await this.sleep(delay);
    }
  }

  private async send(method: string, path: string, body: string | undefined, extra: Readonly<Record<string, string>>): Promise<Answer> {
    const url = new URL(`${this.where.replace(/\/+$/, '')}${path}`);
    let headers: Record<string, string> = { host: url.host, ...extra };
    if (this.signer !== null) {
      const signed = await this.signer.sign({
        method,
        protocol: url.protocol,
        hostname: url.hostname,
        path: url.pathname,
        // API Gateway's IAM check covers the query too (`GET /jobs?limit=`).
        query: Object.fromEntries(url.searchParams),
        headers,
        body,
      });
      headers = signed.headers as Record<string, string>;
    }
    const local = this.local;
    // A local runtime gets a bounded wait, the body's reading included: a stopped process
    // accepts connections (the kernel does) and never answers them. The timer is one that
    // keeps this process up (AbortSignal.timeout's does not): a call whose connection went
    // with a runtime closing it must end in an answer or this error, not in a process that
    // finds nothing left to wait for and exits mid-command.
    const abort = local === null ? null : new AbortController();
    const timer = abort === null || local === null ? undefined : setTimeout(() => abort.abort(), local.answerWithinMs);
    let response: Response;
    let text: string;
    try {
      response = await fetch(url, { method, headers, body, signal: abort?.signal });
      text = await response.text();
    } catch (error) {
      if (local !== null && abort?.signal.aborted === true) throw this.notAnswering(local, method, path);
      return { status: 0, ok: false, body: null, retryAfter: null, failure: (error as Error).message };
    } finally {
      clearTimeout(timer);
    }
    return { status: response.status, ok: response.ok, body: parseJson(text), retryAfter: response.headers.get('retry-after'), failure: '' };
  }

  private notAnswering(local: { readonly pid: number; readonly answerWithinMs: number; readonly dataDir: string }, method: string, path: string): RuntimeNotAnsweringError {
    const seconds = local.answerWithinMs / 1000;
    return new RuntimeNotAnsweringError(
      local.pid,
      `the local runtime of ${local.dataDir} (pid ${local.pid}, ${this.where}) is not answering: no answer to ${method} ${path.split('?', 1)[0]} within ${seconds} s (${RUNTIME_WAIT_VARIABLE} sets the wait). It may be stopped (kill -CONT ${local.pid} resumes it) or overloaded`,
    );
  }
}

/** One try's answer; status 0 when nothing answered (then `failure` says why). */
interface Answer {
  readonly status: number;
  readonly ok: boolean;
  readonly body: unknown;
  readonly retryAfter: string | null;
  readonly failure: string;
}

/** Answers worth trying again: throttled, not served, or not answered at all (0). */
const RETRIED_STATUSES: ReadonlySet<number> = new Set([0, 429, 500, 502, 503, 504]);

/**
 * How long to wait before trying a call again after try number `tryNumber` (from 1), or
 * null when its answer is final. A 429 or 503 with a Retry-After (seconds, or an HTTP
 * date measured from `nowMs`) waits that long, at most MAX_RETRY_AFTER_MS; otherwise 1 s,
 * doubling with each try, half of it fixed and half at random, so clients refused together
 * do not come back together.
 */
export function retryDelayMs(
  answer: { readonly status: number; readonly retryAfter: string | null },
  tryNumber: number,
  nowMs: number,
  random: () => number,
): number | null {
  if (!RETRIED_STATUSES.has(answer.status)) return null;
  if ((answer.status === 429 || answer.status === 503) && answer.retryAfter !== null) {
    const asked = retryAfterMs(answer.retryAfter, nowMs);
    if (asked !== null) return Math.min(MAX_RETRY_AFTER_MS, asked);
  }
  const delay = RETRY_BASE_MS * 2 ** (tryNumber - 1);
  return Math.round(delay / 2 + random() * (delay / 2));
}

/** A Retry-After header in ms from `nowMs` (never negative); null when it is neither form. */
function retryAfterMs(header: string, nowMs: number): number | null {
  const text = header.trim();
  if (/^[0-9]{1,10}$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) || !/[a-z]/i.test(text) ? null : Math.max(0, at - nowMs);
}

/**
 * The task with `--env` and `--secret` values written into its `envs` and `secrets`, for
 * an API that takes only the task (over HTTPS; the API stores the secrets apart from the
 * job). The CLI checks the file itself first, so errors keep the file's line numbers.
 */
export function withOverrides(body: string, overrides: Readonly<Record<'envs' | 'secrets', Readonly<Record<string, string>>>>): string {
  const entries = Object.entries(overrides).flatMap(([section, values]) => Object.entries(values).map(([key, value]) => [section, key, value] as const));
  if (entries.length === 0) return body;
  const docs = parseAllDocuments(body);
  if (!Array.isArray(docs) || docs.some((doc) => doc.errors.length > 0)) return body;
  const tasks = docs.filter((doc) => doc.contents !== null && !(isScalar(doc.contents) && doc.contents.value === null));
  // A pipeline's every task takes them; its header is not a task.
  const header = isPipelineHeader(tasks[0]?.toJS(), tasks.length) ? tasks[0] : undefined;
  for (const doc of tasks) {
    if (doc === header) continue;
    for (const [section, key, value] of entries) {
      // `envs:` with nothing after it (or `~`) is a section without entries yet.
      if (!isMap(doc.get(section))) doc.set(section, doc.createNode({}));
      // Quoted, so `yes` or `on` stays the text given, as it does without an API.
      const scalar = doc.createNode(value) as Scalar;
      scalar.type = 'QUOTE_DOUBLE';
      doc.setIn([section, key], scalar);
    }
  }
  return docs.map((doc) => doc.toString()).join('');
}

/** The error a failed API call stands for, so the CLI maps it to the same exit status as locally. */
function apiError(status: number, body: unknown, path: string): Error {
  const { error, issues } = (body ?? {}) as { error?: string; issues?: InputIssue[] };
  if (status === 400 && Array.isArray(issues)) return new InvalidTaskSpecError(issues);
  // A request the API understood and refused as asked (an idempotency key used for another task).
  if (status === 422 && Array.isArray(issues)) return new InvalidInputError(issues);
  if (status === 404 && path.startsWith('/jobs/')) return new JobNotFoundError(decodeURIComponent(path.slice('/jobs/'.length).split(/[/?]/)[0] ?? ''));
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
