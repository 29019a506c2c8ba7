// The agent's callbacks: routes, bodies and answers, written once for the agent and the API.

import type { ReuseSetup } from '../task-file/types.ts';
import * as z from '../zod.ts';

/**
 * How long AwaitAttempt waits between heartbeats before the attempt counts as lost. The
 * agent beats every HEARTBEAT_INTERVAL_SECONDS, so three can be missed.
 */
export const HEARTBEAT_TIMEOUT_SECONDS = 300;
/** How often the agent heartbeats while its attempt runs. */
export const HEARTBEAT_INTERVAL_SECONDS = 60;

/** Lines of a phase's output the agent sends back (the end of it). */
export const OUTPUT_TAIL_LINES = 50;
/** At most this many bytes of those lines: a progress bar can make one line megabytes long. */
export const OUTPUT_TAIL_MAX_BYTES = 8192;

/** The path of an attempt's heartbeat callback. */
export function heartbeatPath(jobId: string, attempt: number): string {
  return `/jobs/${encodeURIComponent(jobId)}/attempts/${attempt}/heartbeat`;
}

/** The path of an attempt's report callback. */
export function reportPath(jobId: string, attempt: number): string {
  return `/jobs/${encodeURIComponent(jobId)}/attempts/${attempt}/report`;
}

/** The path a holding standby's agent asks on whether to go on to run. */
export function holdPath(jobId: string, attempt: number): string {
  return `/jobs/${encodeURIComponent(jobId)}/attempts/${attempt}/hold`;
}

/** The path of an attempt's data credentials (AWS only: S3 access scoped to the job). */
export function dataCredentialsPath(jobId: string, attempt: number): string {
  return `/jobs/${encodeURIComponent(jobId)}/attempts/${attempt}/data-credentials`;
}

/**
 * The path of a node's CloudWatch Logs credentials (AWS only: PutLogEvents into that node's
 * own streams of the attempt, nothing else). The answer is a ProcessCredentials.
 */
export function logCredentialsPath(jobId: string, attempt: number): string {
  return `/jobs/${encodeURIComponent(jobId)}/attempts/${attempt}/log-credentials`;
}

/**
 * How the agent ships a phase's output to CloudWatch Logs: it looks at the log every
 * SHIP_INTERVAL_SECONDS and sends what is new (at once again while more than a batch waits).
 */
export const SHIP_INTERVAL_SECONDS = 2;
/**
 * How far (bytes) the shipper may fall behind the log before it skips to its end and says
 * in the stream how much it skipped and why: a minute of a job printing as fast as
 * CloudWatch Logs takes one stream's events, and no more than a node's disk holds easily.
 */
export const SHIP_BACKLOG_BYTES = 64 * 1024 * 1024;
/**
 * How long the shipper has, once its phase has ended or the node is going, to send what is
 * left, in seconds: beside the stopped report (STOPPED_REPORT_RETRY_SECONDS), inside the
 * 25 s EC2's two-minute warning leaves after the job's grace period.
 */
export const SHIP_DRAIN_SECONDS = 10;

/**
 * The HTTP status that tells the agent its attempt is no longer the live one: it stops
 * retrying. Every 2xx is an acknowledgement; 408, 429, 5xx and no answer are retried with
 * jittered backoff (a report until it is answered, a heartbeat until the next one is due);
 * any other 4xx is final too (no retry would change it). A 429 may come from API
 * Gateway's throttle or the optional WAF rate rule (infra/constructs/job-api.ts), which
 * answers 429 rather than WAF's usual 403 for exactly this reason.
 */
export const STALE_ATTEMPT_STATUS = 409;

const nodeRank = z.number().check(z.int(), z.minimum(0));

/**
 * The environment variable that names the job's progress file: a job that writes a step
 * number there (`echo 1200 > "$RELAUNCH_PROGRESS_FILE"`) tells relaunch how far it got, and
 * the work an attempt loses is counted from the last step it wrote, not from run's start.
 */
export const PROGRESS_FILE_ENV = 'RELAUNCH_PROGRESS_FILE';

/**
 * The job's last progress, as a heartbeat carries it: the step the file holds, and how long
 * ago the file was written (seconds, by the node's clock), so the API dates it by its own.
 */
export const ProgressSchema = z.object({
  step: z.number().check(z.int(), z.minimum(0)),
  ageSeconds: z.number().check(z.int(), z.minimum(0)),
});

/** A heartbeat's progress, parsed. */
export type Progress = z.infer<typeof ProgressSchema>;

/**
 * `POST .../heartbeat`: the node is alive. Sent at start, then every heartbeat interval,
 * with the job's progress when its progress file holds a step.
 */
export const HeartbeatBodySchema = z.object({ nodeRank, progress: z.optional(ProgressSchema) });
/** A heartbeat's body, parsed. */
export type HeartbeatBody = z.infer<typeof HeartbeatBodySchema>;

/** A body that only names the node asking. */
const NodeBodySchema = z.object({ nodeRank });

/**
 * `POST .../hold`: a node that holds before run (a standby, launch_on_warning) asks whether
 * to go on; the answer is `{run: 'hold' | 'go' | 'stop', reason}` (lib/standby-rules.ts).
 */
export const HoldBodySchema = NodeBodySchema;

/**
 * The path a node asks on, once its job of attempt `attempt` has ended (it exited, or was
 * stopped because its attempt ended: the held-after tag), what it does next: wait, shut
 * down, or run the next attempt on this same node. It proves itself with attempt
 * `attempt`'s secret, which this route alone still takes after the attempt ended.
 */
export function nextPath(jobId: string, attempt: number): string {
  return `/jobs/${encodeURIComponent(jobId)}/attempts/${attempt}/next`;
}

/** `POST .../next`: the node asking, as a heartbeat names it. */
export const NextBodySchema = NodeBodySchema;

/**
 * The answer to `POST .../next`. `wait`: ask again in HOLD_POLL_MS (the attempt is not
 * decided yet, or the next one not placed). `stop`: shut down (the job ended, this node is
 * not kept, or the wait was too long). `run`: this node is node `nodeRank` of `numNodes`
 * of attempt `attempt`; it reads its new callback secret from its parameter (rewritten for
 * that attempt), runs setup or skips it as `setup` says, and goes on as a node of that
 * attempt launched fresh would.
 */
export type NextAnswer =
  | { readonly next: 'wait' | 'stop'; readonly reason: string }
  | {
      readonly next: 'run';
      readonly reason: string;
      readonly attempt: number;
      readonly nodeRank: number;
      readonly numNodes: number;
      /** Every node's private IP, rank 0 first. */
      readonly nodeIps: readonly string[];
      readonly setup: ReuseSetup;
    };

/** `POST .../data-credentials`: the node asking, as a heartbeat names it. */
export const DataCredentialsBodySchema = NodeBodySchema;

/**
 * The path a node asks the agent's library on (agent.sh's functions only some nodes need:
 * the tools' installs, S3 copies and mounts, the ECR login and the log shipper, which user
 * data has no room for): text, pinned by its SHA-256 in the agent's settings.
 */
export function shipperPath(jobId: string, attempt: number): string {
  return `/jobs/${encodeURIComponent(jobId)}/attempts/${attempt}/shipper`;
}

/** `POST .../shipper`: the node asking, as a heartbeat names it. */
export const ShipperBodySchema = HeartbeatBodySchema;

/** `POST .../log-credentials`: the node asking, as a heartbeat names it. */
export const LogCredentialsBodySchema = HeartbeatBodySchema;

/**
 * The answer to `POST .../data-credentials`: temporary credentials in the shape an AWS
 * profile's `credential_process` prints, so the agent hands the body to the AWS CLI and
 * mountpoint-s3 as it is; they ask again before `Expiration`.
 */
export interface ProcessCredentials {
  readonly Version: 1;
  readonly AccessKeyId: string;
  readonly SecretAccessKey: string;
  readonly SessionToken: string;
  /** ISO 8601. */
  readonly Expiration: string;
}

/**
 * The agent's own steps before setup, as a report of its failure names them. A failure of
 * one is relaunch's, never the job's: the attempt ends AGENT_FAILED and is recovered.
 */
export const AgentStep = {
  /** Asking the API for the job's S3 credentials (refused, or no answer in the boot window). */
  DATA_CREDENTIALS: 'data-credentials',
  /** Installing what the node lacks: the AWS CLI, mountpoint-s3, git, docker. */
  INSTALL: 'install',
  /** Putting the workdir and the file mounts in place (fetch, copy, mount, clone). */
  MOUNTS: 'mounts',
  /** Logging docker in to the image's registry (ECR). */
  IMAGE_LOGIN: 'image-login',
  /** Pulling the task's Docker image. */
  IMAGE_PULL: 'image-pull',
  /** Starting the task's container. */
  CONTAINER: 'container',
  /**
   * On a node kept from the attempt before (restart in place): proving that attempt's
   * processes gone (its sessions, what they left behind, its container, its GPU processes)
   * before this attempt starts. A node that cannot is replaced.
   */
  PREVIOUS_ATTEMPT: 'previous-attempt',
} as const;
/** One of the agent's own steps. */
export type AgentStep = (typeof AgentStep)[keyof typeof AgentStep];
/** Every agent step, in the order the agent takes them. */
export const AGENT_STEPS: readonly AgentStep[] = Object.values(AgentStep);

/** The longest error an agent's failure report carries, in characters. */
export const AGENT_ERROR_MAX_LENGTH = 1000;

/** Which of the agent's own steps failed, and its error (one line, as the agent logged it). */
export interface AgentFailure {
  readonly step: AgentStep;
  readonly error: string;
}

/**
 * What stopped a phase before it exited, as a stopped report says: EC2's spot interruption
 * notice, the node's agent told to end (SIGTERM, SIGINT or SIGHUP: the node shutting
 * down for a cancel, a release, or its operator), or its attempt ended with the node kept
 * for the next one (`held`: the held-after tag).
 */
export const STOP_CAUSES = ['interruption', 'shutdown', 'held'] as const;
/** One of STOP_CAUSES. */
export type StopCause = (typeof STOP_CAUSES)[number];

/**
 * How long the agent tries to deliver a stopped report, in seconds: it is sent between the
 * job's grace period and the node's shutdown, inside EC2's two-minute warning.
 */
export const STOPPED_REPORT_RETRY_SECONDS = 15;

/**
 * The longest setup a report is taken to say it ran, in ms: 30 days. A figure past it (a
 * node's clock that jumped) is stored as this bound, never refused: the report carries the
 * exit code, which must not be lost over a timing figure.
 */
export const SETUP_MS_MAX = 30 * 24 * 3600 * 1000;

const agentFailure = z.object({
  step: z.enum(AGENT_STEPS as [AgentStep, ...AgentStep[]]),
  error: z.string().check(z.maxLength(AGENT_ERROR_MAX_LENGTH)),
});

/**
 * `POST .../report`: one node's end of one phase. Every node reports `setup` (exit 0 when
 * the task has none), then `run` unless setup failed. A node whose agent failed one of its
 * own steps before setup reports that instead of setup's code: `phase: 'setup'` with
 * `agentFailure` and no `exitCode` (a body of an agent from before AGENT_FAILED, with its
 * exitCode, is read as it always was). A phase the agent stopped before it exited (a spot
 * notice, the node shutting down) is reported with `stopped` and no `exitCode`: its last
 * lines, deciding nothing. A report is resent until a 2xx or a final 4xx answers it, so
 * the API must treat a repeat as already done.
 */
export const ReportBodySchema = z
  .object({
    nodeRank,
    phase: z.enum(['setup', 'run']),
    /** The shell's code: 128+N for death by signal N. Absent when `agentFailure` says what ended the node. */
    exitCode: z.optional(z.number().check(z.int(), z.minimum(0), z.maximum(255))),
    /** The agent's own step that failed before setup; absent when the node ran its phase. */
    agentFailure: z.optional(agentFailure),
    /** What stopped the phase before it exited; absent when it exited (or the agent failed). */
    stopped: z.optional(z.enum(STOP_CAUSES)),
    /**
     * How long setup itself ran on the node, in ms, as the agent measured it around the task's
     * `setup` (0 when it skipped setup on a node kept from the attempt before): with the
     * report's time it dates setup's start apart from the agent's own steps before it.
     * Only on a setup report with its exit code; absent from an agent from before it.
     */
    setupMs: z.optional(
      z.pipe(
        z.number({ error: 'expected a whole number of ms' }).check(z.int('expected a whole number of ms'), z.minimum(0, 'expected 0 or more ms'), z.maximum(Number.MAX_SAFE_INTEGER, 'expected a whole number of ms')),
        z.transform((ms) => Math.min(ms, SETUP_MS_MAX)),
      ),
    ),
    /** The last OUTPUT_TAIL_LINES lines of stdout and stderr, at most OUTPUT_TAIL_MAX_BYTES. */
    outputTail: z.string().check(z.maxLength(OUTPUT_TAIL_MAX_BYTES)),
  })
  .check(
    z.superRefine((body, context) => {
      const said = [body.exitCode, body.agentFailure, body.stopped].filter((value) => value !== undefined).length;
      if (said === 0) {
        context.addIssue({ code: 'custom', path: ['exitCode'], message: 'expected an exit code 0-255, or agentFailure when the agent failed before setup', input: body });
      } else if (body.stopped !== undefined && said > 1) {
        context.addIssue({ code: 'custom', path: ['stopped'], message: 'expected stopped alone, without exitCode or agentFailure (a stopped phase has no code)', input: body });
      } else if (body.exitCode !== undefined && body.agentFailure !== undefined) {
        context.addIssue({ code: 'custom', path: ['agentFailure'], message: 'expected either exitCode or agentFailure, got both', input: body });
      } else if (body.agentFailure !== undefined && body.phase !== 'setup') {
        context.addIssue({ code: 'custom', path: ['phase'], message: `expected setup with agentFailure (the agent's steps come before it), got ${body.phase}`, input: body });
      } else if (body.setupMs !== undefined && (body.phase !== 'setup' || body.exitCode === undefined)) {
        const got = body.phase !== 'setup' ? `on ${body.phase}` : body.stopped !== undefined ? 'with stopped' : 'with agentFailure';
        context.addIssue({ code: 'custom', path: ['setupMs'], message: `expected setupMs only on a setup report with its exit code, got it ${got}`, input: body });
      }
    }),
  );
/** A report's body, parsed. */
export type ReportBody = z.infer<typeof ReportBodySchema>;

/** The Authorization header the agent sends: the attempt's callback secret as a bearer token. */
export function authorizationHeader(secret: string): string {
  return `Bearer ${secret}`;
}

/** The secret of an Authorization header, or null when it is not a bearer token. */
export function secretOfAuthorization(header: string | undefined | null): string | null {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
  return match?.[1] ?? null;
}
