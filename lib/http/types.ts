// The API layer's own request and response: plain data, so API Gateway and a local server
// (`relaunch serve`) can both adapt to it.

import type { InputIssue } from '../errors.ts';
import type { ControllerLogReader, DataAccess, JobEnded, JobLogReader, LogAccess } from '../ports.ts';
import type { TaskSpec } from '../task-file/types.ts';
import type { UseCaseDeps } from '../usecases/deps.ts';

/** An HTTP request, reduced to what relaunch reads. Header names in any case. */
export interface ApiRequest {
  readonly method: string;
  /** The path, e.g. `/jobs/j-1/attempts/2/report`; a query string is ignored. */
  readonly path: string;
  readonly headers: Readonly<Record<string, string | undefined>>;
  /** The body as text (already base64-decoded); undefined or '' when there is none. */
  readonly body?: string | undefined;
  /**
   * Who sent it, as the gateway authenticated them (API Gateway's IAM caller ARN);
   * undefined where nobody is authenticated (`relaunch serve`, one user on 127.0.0.1).
   * Idempotency keys are kept apart per caller.
   */
  readonly caller?: string | undefined;
}

/** An HTTP response: the body is JSON text (or empty). */
export interface ApiResponse {
  readonly statusCode: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

/**
 * Where uploads go: `s3://<bucket>/<prefix>/<sha256>.tar.gz`, in `region`; and the other
 * buckets the stack lets tasks use (names, or prefixes ending in `*`), so that `run`
 * creates no bucket the submit would then refuse.
 */
export interface SourcesLocation {
  readonly bucket: string;
  readonly prefix: string;
  readonly region: string;
  readonly allowedBuckets: readonly string[];
}

/** What the routes need: the use cases' ports, and a place to report unexpected errors. */
export interface ApiDeps extends Pick<UseCaseDeps, 'store' | 'workflow' | 'clock' | 'random' | 'secrets' | 'pace'> {
  /** What the compute behind this API cannot run, refused at submit (SubmitJobInput.computeProblems). */
  readonly computeProblems?: (spec: TaskSpec) => Promise<readonly InputIssue[]>;
  /** Told of a job a request ended (a submit whose execution could not start). */
  readonly onJobEnded?: (ended: JobEnded) => Promise<void>;
  /**
   * Where `relaunch run` uploads workdirs and local file mounts (`GET /sources`): the
   * stack's bucket, the prefix, its region. Absent: this API keeps no uploads in S3 (the
   * local runtime's are in its data folder), and the route answers 404.
   */
  readonly sources?: SourcesLocation;
  /**
   * Gives EC2 nodes the credentials for their job's S3 data (`POST .../data-credentials`).
   * Absent: this API's nodes reach their data without them (the local runtime's folders),
   * and the route answers 404.
   */
  readonly dataAccess?: DataAccess;
  /**
   * Reads nodes' output for `GET /jobs/{id}/logs`: the
   * node's files locally, the deployment's CloudWatch Logs streams on AWS. Absent: the route answers 404.
   */
  readonly jobLogs?: JobLogReader;
  /**
   * Reads the controller functions' lines about a job (`GET /jobs/{id}/controller-log`), on
   * a deployed stack. Absent (a local runtime, whose controller is the serving process):
   * the route answers 404.
   */
  readonly controllerLog?: ControllerLogReader;
  /**
   * Gives EC2 nodes the credentials to ship their output into their own CloudWatch Logs
   * streams (`POST .../log-credentials`). Absent: nothing ships (the local runtime), and
   * the route answers 404.
   */
  readonly logAccess?: LogAccess;
  /**
   * Called with an error no route expected, before a generic 500 is answered (the
   * response never carries it). A Lambda logs it here.
   */
  readonly onUnexpectedError?: (error: unknown, request: ApiRequest) => void;
}
