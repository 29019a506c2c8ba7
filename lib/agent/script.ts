// The agent for one attempt: lib/agent/agent.sh, the shell program an instance runs as its
// user data (what it does, its processes and how it ends are described there), with its
// settings block filled in. Every setting is single-quoted, the task's setup, run, envs
// and mounts included: no text of the user's can end up as agent code. The program ships
// without its comment lines, which would take a quarter of user data's 16 KiB gzipped.

import { createHash } from 'node:crypto';
import { PrecheckError } from '../errors.ts';
import { jobEnvironment } from '../job-env.ts';
import type { TaskSpec } from '../task-file/types.ts';
import {
  authorizationHeader,
  heartbeatPath,
  holdPath,
  OUTPUT_TAIL_LINES,
  OUTPUT_TAIL_MAX_BYTES,
  dataCredentialsPath,
  HEARTBEAT_TIMEOUT_SECONDS,
  logCredentialsPath,
  nextPath,
  shipperPath,
  SHIP_BACKLOG_BYTES,
  SHIP_DRAIN_SECONDS,
  SHIP_INTERVAL_SECONDS,
  reportPath,
  STALE_ATTEMPT_STATUS,
  STOPPED_REPORT_RETRY_SECONDS,
} from './protocol.ts';
import { WORKDIR_PATH } from '../task-file/mounts.ts';
import { AGENT_SOURCE } from './agent-source.ts';
import { mountLines, type AgentMount } from './mounts.ts';
import { GET_PARAMETER_TARGET, type SecretSource } from './secret-parameter.ts';
import { NODE_IPS_TAG_PREFIX, nodeIpsTagCount, TagKey } from './tags.ts';
import { nodeLogStreamPrefix } from '../job-log-names.ts';
import { reuseChoice } from '../reuse-rules.ts';

/** Where a node ships its phases' output: the deployment's log group in CloudWatch Logs. */
export interface JobLogShipping {
  /** The log group (job-logs.ts's jobLogGroupName). */
  readonly group: string;
  /** The log group's region. */
  readonly region: string;
  /** CloudWatch Logs' endpoint. @default `https://logs.<region>.amazonaws.com` */
  readonly endpoint?: string;
  /**
   * Seconds between two looks at the log; what is new goes then (at once again while more
   * than a batch waits).
   * @default SHIP_INTERVAL_SECONDS
   */
  readonly intervalSeconds?: number;
  /** @default SHIP_BACKLOG_BYTES */
  readonly backlogBytes?: number;
  /** @default SHIP_DRAIN_SECONDS */
  readonly drainSeconds?: number;
}

/** Everything one node's agent needs to know. */
export interface AgentScriptParams {
  /** The API's base URL, e.g. `https://abc.execute-api.us-east-1.amazonaws.com/prod`. */
  readonly apiUrl: string;
  readonly jobId: string;
  /** 1-based. */
  readonly attempt: number;
  /**
   * Where the agent reads the attempt's callback secret (sent as protocol.ts's
   * authorizationHeader says): its instance's parameter under this path.
   */
  readonly secretSource: SecretSource;
  readonly spec: TaskSpec;
  /**
   * Seconds between heartbeats (HEARTBEAT_INTERVAL_SECONDS on AWS); at least 0.01, in
   * steps of a millisecond (a local runtime beats faster than EC2 needs to).
   */
  readonly heartbeatSeconds: number;
  /** This node's rank; omitted, the agent takes 0 for one node, else reads its `relaunch:node-rank` tag from IMDS. */
  readonly nodeRank?: number;
  /**
   * Every node's private IP, head first; omitted, the agent reads its own IP (one node) or
   * the `relaunch:node-ips:*` instance tags (several) from IMDS.
   */
  readonly nodeIps?: readonly string[];
  /**
   * SKYPILOT_NUM_GPUS_PER_NODE: the launched type's GPU count.
   * @default the count of the task's first accelerator candidate, else 0
   */
  readonly gpusPerNode?: number;
  /**
   * Where the agent keeps the scripts, logs and reports.
   * @default '/opt/relaunch'
   */
  readonly rootDir?: string;
  /**
   * Where setup and run start when the task has no workdir (with one, `~/sky_workdir`).
   * The local runtime gives each job one folder that outlives its attempts.
   * @default `rootDir`
   */
  readonly workDir?: string;
  /**
   * What to put on disk before setup: the workdir and the file mounts (mounts.ts).
   * @default none
   */
  readonly mounts?: readonly AgentMount[];
  /**
   * Where uploaded sources are: `s3://bucket/prefix` (fetched with the AWS CLI) or a
   * local folder (the local runtime's store). Needed when a mount is an upload.
   */
  readonly sourcesUrl?: string;
  /**
   * Whether the S3 steps (uploads from S3, s3-copy, s3-mount) use the job's own data
   * credentials, asked of the API (`POST .../data-credentials`) with the callback secret
   * before the mounts and again every `dataCredentialsRefreshSeconds`, rather than the
   * machine's. EC2 nodes do: their instance role has no S3 access of its own.
   * @default false
   */
  readonly dataCredentials?: boolean;
  /**
   * Seconds between the asks for fresh data credentials (they last an hour).
   * @default 900
   */
  readonly dataCredentialsRefreshSeconds?: number;
  /**
   * Prefixed to the mounts' absolute paths: the local runtime maps `/data` into the job's
   * folder. Always exported to the job as RELAUNCH_MOUNT_ROOT, empty when not given, so
   * `"$RELAUNCH_MOUNT_ROOT/data"` reads as `/data` on EC2, even under `set -u`.
   * @default '' (the paths as written)
   */
  readonly mountRoot?: string;
  /**
   * The job's home folder, where `~/` mounts and the workdir go: the local runtime gives
   * each node one of its own rather than the user's.
   * @default the agent's HOME (root's on EC2)
   */
  readonly jobHome?: string;
  /**
   * A shell command run once the reports are acknowledged, inserted as is.
   * @default 'shutdown -h now'
   */
  readonly shutdownCommand?: string;
  /**
   * Whether a Docker container gets the node's GPUs (`--gpus all`).
   * @default gpusPerNode > 0
   */
  readonly containerGpus?: boolean;
  /**
   * Seconds before the second try at pulling a Docker image, logging in to its registry or
   * cloning a repository (twice that before the third), each wait jittered.
   * @default 5
   */
  readonly pullRetrySeconds?: number;
  /**
   * ECR's API for the image's registry (the agent signs GetAuthorizationToken itself).
   * @default `https://api.ecr.<the registry's region>.amazonaws.com`
   */
  readonly ecrEndpoint?: string;
  /**
   * Report and heartbeat retries wait about `initialMs`, doubling up to `maxMs`; each wait
   * is half its delay plus up to the other half at random, so agents throttled together
   * do not come back together. A heartbeat's retries also stop when the next beat is due.
   * @default { initialMs: 1000, maxMs: 60000 }
   */
  readonly reportBackoff?: { readonly initialMs: number; readonly maxMs: number };
  /**
   * Where the AWS CLI and mountpoint-s3 are downloaded from when the machine image lacks
   * them, and the key their signatures must be made with.
   * @default TOOL_DOWNLOADS
   */
  readonly toolDownloads?: ToolDownloads;
  /** @default 'http://169.254.169.254' */
  readonly imdsUrl?: string;
  /**
   * How long to wait for the rank and the IPs from IMDS before giving up.
   * @default 600
   */
  readonly discoveryTimeoutSeconds?: number;
  /**
   * How long a report answered with a timeout, throttling, a 5xx or nothing at all is tried
   * again before the agent gives up and shuts the node down. A whole number of seconds.
   * @default REPORT_RETRY_SECONDS
   */
  readonly reportRetrySeconds?: number;
  /**
   * Seconds a stopped job gets between SIGTERM and SIGKILL: a cancel, a release, the node
   * shutting down, a spot interruption notice. A whole number from 0 to 100.
   * @default STOP_GRACE_SECONDS
   */
  readonly stopGraceSeconds?: number;
  /**
   * Seconds between two looks at instance metadata for a spot interruption notice; 0 never
   * looks. At least 0.1 otherwise.
   * @default INTERRUPTION_POLL_SECONDS
   */
  readonly interruptionPollSeconds?: number;
  /**
   * Seconds between a holding standby's asks whether to go on to run (launch_on_warning),
   * each jittered; at least 0.05.
   * @default HOLD_POLL_SECONDS
   */
  readonly holdPollSeconds?: number;
  /**
   * On a node that may serve the next attempt (the task reuses nodes: reuse-rules.ts's
   * reuseChoice), how long the agent asks what to do next once its job has ended (`POST
   * .../next`, every holdPollSeconds) before it gives up and shuts down. A whole number of
   * seconds >= 1.
   * @default NEXT_WAIT_SECONDS
   */
  readonly nextWaitSeconds?: number;
  /**
   * On such a node, how long the agent has to prove the ended attempt's processes gone
   * (its sessions, what they left behind, its container, its GPU processes) before it
   * reports that it could not. A whole number of seconds >= 1.
   * @default the grace period (stopGraceSeconds) + PROOF_MARGIN_SECONDS
   */
  readonly proofSeconds?: number;
  /**
   * With the task's launch_on_warning, a spot interruption notice stops the job this long,
   * plus its grace period, before the instance goes (not at once, as without it), so the
   * job keeps working while its standby sets up: the time the agent has to clean up and
   * shut down once the grace period is over. A whole number of seconds from 0 to 60.
   * @default WARNING_STOP_MARGIN_SECONDS
   */
  readonly warningStopMarginSeconds?: number;
  /**
   * Ship each phase's output to this CloudWatch Logs group while it runs, with credentials
   * for this node's streams asked of the API (`POST .../log-credentials`, with the
   * callback secret). EC2 nodes of a stack do; the local runtime ships nothing.
   * @default none: nothing is shipped
   */
  readonly logs?: JobLogShipping;
}

/**
 * A stopped job's grace period on EC2, in seconds. EC2 reclaims a spot instance two
 * minutes after its interruption notice; the agent sees the notice within
 * INTERRUPTION_POLL_SECONDS, and the job's grace, the cleanup and the shutdown that follow
 * must fit in what is left.
 */
export const STOP_GRACE_SECONDS = 90;

/**
 * How long the agent tries a report the API does not acknowledge, in seconds: ten minutes,
 * twice the heartbeat timeout, past which the controller has ended the attempt as lost
 * anyway (a late report is then refused as stale).
 */
export const REPORT_RETRY_SECONDS = 2 * HEARTBEAT_TIMEOUT_SECONDS;

/** How often the agent looks for a spot interruption notice on EC2, in seconds (AWS suggests every 5 s). */
export const INTERRUPTION_POLL_SECONDS = 5;

/**
 * How often a holding standby asks the API whether to go on to run, in seconds: the most
 * a relaunch waits for the standby to notice it may go (half that on average), and one
 * request per holding node every 2 s on the agent routes' throttle.
 */
export const HOLD_POLL_SECONDS = 2;

/**
 * How long a node whose job has ended asks what to do next before it shuts down, in
 * seconds: the controller decides an attempt within seconds and places the next one
 * within MAX_HOLD_SECONDS (reuse-rules.ts) plus a launch; past this the node is paid for
 * nothing.
 */
export const NEXT_WAIT_SECONDS = 900;

/**
 * The time a node has, beyond the job's grace period, to prove the ended attempt's
 * processes gone (SIGKILL delivered, the container removed, the GPUs freed), in seconds.
 */
export const PROOF_MARGIN_SECONDS = 30;

/**
 * With launch_on_warning, how long before EC2 reclaims a spot instance the job's grace
 * period must have ended, in seconds: the agent's cleanup and shutdown. On EC2 the notice
 * comes 120 s before; with the 90 s grace the job is stopped 110 s before, 10 s after the
 * notice.
 */
export const WARNING_STOP_MARGIN_SECONDS = 20;

/**
 * A tool the agent installs from its vendor when the machine image lacks it: one pinned
 * version, whose package is verified before anything in it runs. `{arch}` in a URL is the
 * node's `uname -m` as the vendor names it, `{pkg}` `deb` or `rpm`.
 */
export interface ToolDownload {
  readonly url: string;
  /** The vendor's detached OpenPGP signature of the package. */
  readonly signatureUrl: string;
  /**
   * Where the vendor's public key is served. Any copy will do: only a signature made by
   * the key with `fingerprint` passes, whatever else the file holds.
   */
  readonly keyUrl: string;
  /** The signing key's fingerprint: 40 hex digits, upper case. */
  readonly fingerprint: string;
}

/** The agent's downloads: the AWS CLI (v2) and mountpoint-s3. */
export interface ToolDownloads {
  readonly awsCli: ToolDownload;
  readonly mountS3: ToolDownload;
}

/** The AWS CLI version a node installs when its image has none (docs/agent.md says how to move it). */
export const AWS_CLI_VERSION = '2.36.40';

/** The mountpoint-s3 version a node installs when its image has none and dnf has no package of it. */
export const MOUNT_S3_VERSION = '1.21.0';

/**
 * What the agent downloads, pinned. The fingerprints are the vendors' own, as their install
 * guides publish them: AWS CLI v2's (aws-cli@amazon.com), and mountpoint-s3's
 * (mountpoint-s3@amazon.com). AWS serves mountpoint-s3's key beside its packages; the AWS
 * CLI's key is published in AWS's guide only, and fetched from a public key server by its
 * fingerprint.
 */
export const TOOL_DOWNLOADS: ToolDownloads = {
  awsCli: {
    url: `https://awscli.amazonaws.com/awscli-exe-linux-{arch}-${AWS_CLI_VERSION}.zip`,
    signatureUrl: `https://awscli.amazonaws.com/awscli-exe-linux-{arch}-${AWS_CLI_VERSION}.zip.sig`,
    keyUrl: 'https://keyserver.ubuntu.com/pks/lookup?op=get&options=mr&search=0xFB5DB77FD5C118B80511ADA8A6310ACC4672475C',
    fingerprint: 'FB5DB77FD5C118B80511ADA8A6310ACC4672475C',
  },
  mountS3: {
    url: `https://s3.amazonaws.com/mountpoint-s3-release/${MOUNT_S3_VERSION}/{arch}/mount-s3-${MOUNT_S3_VERSION}-{arch}.{pkg}`,
    signatureUrl: `https://s3.amazonaws.com/mountpoint-s3-release/${MOUNT_S3_VERSION}/{arch}/mount-s3-${MOUNT_S3_VERSION}-{arch}.{pkg}.asc`,
    keyUrl: 'https://s3.amazonaws.com/mountpoint-s3-release/public_keys/KEYS',
    fingerprint: '673FE4061506BB469A0EF857BE397A52B086DA5A',
  },
};

/** A download as the agent's setting holds it: its four fields, one space apart (none holds a space). */
function downloadSetting(name: string, download: ToolDownload): string {
  const fields = [download.url, download.signatureUrl, download.keyUrl, download.fingerprint];
  if (fields.some((field) => field === '' || /\s/.test(field))) throw new RangeError(`toolDownloads.${name}: expected URLs and a fingerprint without spaces`);
  if (!/^[0-9A-F]{40}$/.test(download.fingerprint)) throw new RangeError(`toolDownloads.${name}.fingerprint: expected 40 upper-case hex digits, got ${download.fingerprint}`);
  return fields.join(' ');
}

/** A node's container is named this and its instance id (`docker rm -f` finds it so). */
export const CONTAINER_PREFIX = 'relaunch-';

/**
 * What shellcheck says of quoted text alone, which the settings hold (a `$` or a leading
 * `~` inside single quotes, a quote written as '\\''): the user's text is data there, so
 * the rendered agent turns these three off for the file. agent.sh itself passes with every
 * check on (npm run lint).
 */
const SETTINGS_DIRECTIVE = '# shellcheck disable=SC1003,SC2016,SC2088';

/** The comment lines that enclose agent.sh's settings block, which the renderer fills in. */
const SETTINGS_BEGIN = '# relaunch:settings-begin';
const SETTINGS_END = '# relaunch:settings-end';
/** The comment lines that enclose the agent's library, which ships apart from user data. */
const LIBRARY_BEGIN = '# relaunch:library-begin';
const LIBRARY_END = '# relaunch:library-end';

/** Variables that differ per node, set by the script once it knows its rank and the IPs. */
const PER_NODE_VARIABLES = ['RELAUNCH_NODE_RANK', 'SKYPILOT_NODE_RANK', 'RELAUNCH_NODE_IPS', 'SKYPILOT_NODE_IPS'];

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** The longest a single heartbeat POST may take, in ms (less when the next beat is due sooner). */
const HEARTBEAT_TRY_MAX_MS = 10_000;
/**
 * A heartbeat is tried again only if this long (ms, at most a quarter of the interval)
 * is left for the try before the next beat is due: a try cut shorter would only time out.
 */
const HEARTBEAT_TRY_MIN_MS = 1000;

/**
 * The agent script for one attempt (and one node, when `nodeRank` is given). The task's
 * env names must be shell identifiers: anything else is a PrecheckError naming it.
 */
export function renderAgentScript(params: AgentScriptParams): string {
  const { spec, jobId, attempt } = params;
  if (!Number.isFinite(params.heartbeatSeconds) || params.heartbeatSeconds < 0.01) {
    throw new RangeError(`heartbeatSeconds: expected a number of seconds >= 0.01, got ${params.heartbeatSeconds}`);
  }
  const retry = params.reportRetrySeconds ?? REPORT_RETRY_SECONDS;
  if (!Number.isInteger(retry) || retry < 1) throw new RangeError(`reportRetrySeconds: expected a whole number of seconds >= 1, got ${retry}`);
  const grace = params.stopGraceSeconds ?? STOP_GRACE_SECONDS;
  if (!Number.isInteger(grace) || grace < 0 || grace > 100) throw new RangeError(`stopGraceSeconds: expected a whole number of seconds 0-100, got ${grace}`);
  const poll = params.interruptionPollSeconds ?? INTERRUPTION_POLL_SECONDS;
  if (!Number.isFinite(poll) || (poll !== 0 && poll < 0.1)) throw new RangeError(`interruptionPollSeconds: expected 0 or a number of seconds >= 0.1, got ${poll}`);
  const holdPoll = params.holdPollSeconds ?? HOLD_POLL_SECONDS;
  if (!Number.isFinite(holdPoll) || holdPoll < 0.05) throw new RangeError(`holdPollSeconds: expected a number of seconds >= 0.05, got ${holdPoll}`);
  const margin = params.warningStopMarginSeconds ?? WARNING_STOP_MARGIN_SECONDS;
  if (!Number.isInteger(margin) || margin < 0 || margin > 60) throw new RangeError(`warningStopMarginSeconds: expected a whole number of seconds 0-60, got ${margin}`);
  const launchOnWarning = (spec.resources.jobRecovery.launchOnWarning ?? false) !== false;
  const nextWait = params.nextWaitSeconds ?? NEXT_WAIT_SECONDS;
  if (!Number.isInteger(nextWait) || nextWait < 1) throw new RangeError(`nextWaitSeconds: expected a whole number of seconds >= 1, got ${nextWait}`);
  const proof = params.proofSeconds ?? grace + PROOF_MARGIN_SECONDS;
  if (!Number.isInteger(proof) || proof < 1) throw new RangeError(`proofSeconds: expected a whole number of seconds >= 1, got ${proof}`);
  const reuse = reuseChoice(spec.resources.jobRecovery).reuse;
  if (params.nodeIps !== undefined && params.nodeIps.length !== spec.numNodes) {
    throw new RangeError(`nodeIps: expected ${spec.numNodes} addresses (one per node), got ${params.nodeIps.length}`);
  }
  const rootDir = (params.rootDir ?? '/opt/relaunch').replace(/\/+$/, '');
  const apiUrl = params.apiUrl.replace(/\/+$/, '');
  const backoff = params.reportBackoff ?? { initialMs: 1000, maxMs: 60_000 };
  const heartbeatMs = Math.round(params.heartbeatSeconds * 1000);
  const config: Record<string, string | number> = {
    JOB_ID: jobId,
    ATTEMPT: attempt,
    AUTH_PREFIX: authorizationHeader(''),
    SECRET_PATH: params.secretSource.path,
    SSM_REGION: params.secretSource.region,
    SSM_URL: params.secretSource.endpoint.replace(/\/+$/, ''),
    SSM_GET_PARAMETER: GET_PARAMETER_TARGET,
    NUM_NODES: spec.numNodes,
    NODE_RANK: params.nodeRank ?? '',
    NODE_IPS: params.nodeIps?.join('\n') ?? '',
    HEARTBEAT_MS: heartbeatMs,
    HEARTBEAT_TRY_MIN_MS: Math.max(1, Math.min(HEARTBEAT_TRY_MIN_MS, Math.floor(heartbeatMs / 4))),
    HEARTBEAT_TRY_MAX_MS,
    HEARTBEAT_URL: apiUrl + heartbeatPath(jobId, attempt),
    REPORT_URL: apiUrl + reportPath(jobId, attempt),
    HOLD_URL: apiUrl + holdPath(jobId, attempt),
    HOLD_POLL_MS: Math.round(holdPoll * 1000),
    // Empty: the node shuts down once its job has ended, and never looks for the held tag.
    REUSE_NODE: reuse ? 1 : '',
    HELD_TAG: reuse ? TagKey.heldAfter : '',
    NEXT_URL: apiUrl + nextPath(jobId, attempt),
    NEXT_WAIT_SECONDS: nextWait,
    PROOF_SECONDS: proof,
    REPORT_RETRY_SECONDS: retry,
    // A stopped phase's report is sent as the node goes: within EC2's two-minute warning.
    STOPPED_RETRY_SECONDS: Math.min(retry, STOPPED_REPORT_RETRY_SECONDS),
    DATA_CREDENTIALS_URL: params.dataCredentials === true ? apiUrl + dataCredentialsPath(jobId, attempt) : '',
    DATA_REFRESH_MS: Math.max(1000, Math.round((params.dataCredentialsRefreshSeconds ?? 900) * 1000)),
    ROOT_DIR: rootDir,
    // The workdir's path relative to the home folder, which the agent learns on the node.
    WORK_DIR: spec.workdir !== null || spec.gitWorkdir !== undefined ? WORKDIR_PATH.replace(/^~\//, '') : (params.workDir ?? rootDir),
    MOUNTS: mountLines(params.mounts ?? []),
    SOURCES_URL: (params.sourcesUrl ?? '').replace(/\/+$/, ''),
    MOUNT_ROOT: (params.mountRoot ?? '').replace(/\/+$/, ''),
    JOB_HOME: params.jobHome ?? '',
    IMDS_URL: (params.imdsUrl ?? 'http://169.254.169.254').replace(/\/+$/, ''),
    DISCOVERY_TIMEOUT_SECONDS: params.discoveryTimeoutSeconds ?? 600,
    INTERRUPTION_POLL_MS: Math.round((params.interruptionPollSeconds ?? INTERRUPTION_POLL_SECONDS) * 1000),
    // Empty: the notice stops the job at once.
    INTERRUPTION_STOP_AHEAD_SECONDS: launchOnWarning ? grace + margin : '',
    STOP_GRACE_SECONDS: params.stopGraceSeconds ?? STOP_GRACE_SECONDS,
    NODE_IPS_TAG_PREFIX,
    NODE_RANK_TAG: TagKey.nodeRank,
    NODE_IPS_TAGS: nodeIpsTagCount(spec.numNodes),
    BACKOFF_INITIAL_MS: Math.max(1, Math.round(backoff.initialMs)),
    BACKOFF_MAX_MS: Math.max(1, Math.round(backoff.maxMs)),
    STALE_STATUS: STALE_ATTEMPT_STATUS,
    TAIL_LINES: OUTPUT_TAIL_LINES,
    TAIL_BYTES: OUTPUT_TAIL_MAX_BYTES,
    SETUP_SCRIPT: spec.setup ?? '',
    RUN_SCRIPT: spec.run ?? '',
    JOB_ENV: environmentFile(params),
    CONTAINER_IMAGE: spec.resources.containerImage ?? '',
    CONTAINER_PREFIX,
    CONTAINER_GPUS: (params.containerGpus ?? (params.gpusPerNode ?? 0) > 0) ? 1 : 0,
    PULL_RETRY_MS: Math.round((params.pullRetrySeconds ?? 5) * 1000),
    ECR_URL: (params.ecrEndpoint ?? '').replace(/\/+$/, ''),
    AWS_CLI_DOWNLOAD: downloadSetting('awsCli', (params.toolDownloads ?? TOOL_DOWNLOADS).awsCli),
    MOUNT_S3_DOWNLOAD: downloadSetting('mountS3', (params.toolDownloads ?? TOOL_DOWNLOADS).mountS3),
    SHUTDOWN_COMMAND: params.shutdownCommand ?? 'shutdown -h now',
    LIBRARY_URL: apiUrl + shipperPath(jobId, attempt),
    LIBRARY_SHA256: AGENT_LIBRARY.sha256,
    ...logSettings(params),
  };
  return [
    '#!/bin/bash',
    `# relaunch agent for job ${oneLine(jobId)}, attempt ${attempt}: rendered by lib/agent/script.ts from agent.sh.`,
    SETTINGS_DIRECTIVE,
    ...AGENT.before,
    ...settingLines(config),
    ...AGENT.after,
  ].join('\n');
}

/** The shipper's settings: all empty when nothing ships. */
function logSettings(params: AgentScriptParams): Record<string, string | number> {
  const logs = params.logs;
  if (logs === undefined) {
    return { LOG_GROUP: '', LOG_STREAM_PREFIX: '', LOGS_REGION: '', LOGS_URL: '', LOG_CREDENTIALS_URL: '', SHIP_INTERVAL_MS: '', SHIP_BACKLOG_BYTES: '', SHIP_DRAIN_MS: '' };
  }
  const interval = logs.intervalSeconds ?? SHIP_INTERVAL_SECONDS;
  if (!Number.isFinite(interval) || interval < 0.05 || interval > 60) throw new RangeError(`logs.intervalSeconds: expected a number of seconds 0.05-60, got ${interval}`);
  const backlog = logs.backlogBytes ?? SHIP_BACKLOG_BYTES;
  if (!Number.isInteger(backlog) || backlog < 1) throw new RangeError(`logs.backlogBytes: expected a whole number of bytes >= 1, got ${backlog}`);
  const drain = logs.drainSeconds ?? SHIP_DRAIN_SECONDS;
  if (!Number.isFinite(drain) || drain < 0 || drain > 60) throw new RangeError(`logs.drainSeconds: expected a number of seconds 0-60, got ${drain}`);
  const apiUrl = params.apiUrl.replace(/\/+$/, '');
  // The rank is the node's to append: it may learn it from its tag.
  const streamPrefix = nodeLogStreamPrefix({ jobId: params.jobId, attempt: params.attempt, nodeRank: 0 }).replace(/0\/$/, '');
  return {
    LOG_GROUP: logs.group,
    LOG_STREAM_PREFIX: streamPrefix,
    LOGS_REGION: logs.region,
    LOGS_URL: (logs.endpoint ?? `https://logs.${logs.region}.amazonaws.com`).replace(/\/+$/, ''),
    LOG_CREDENTIALS_URL: apiUrl + logCredentialsPath(params.jobId, params.attempt),
    SHIP_INTERVAL_MS: Math.round(interval * 1000),
    SHIP_BACKLOG_BYTES: backlog,
    SHIP_DRAIN_MS: Math.round(drain * 1000),
  };
}

/** The exports every phase sources: the task's envs, then relaunch's and SkyPilot's. */
function environmentFile(params: AgentScriptParams): string {
  const { spec } = params;
  for (const name of Object.keys(spec.envs)) {
    if (!ENV_NAME.test(name)) {
      throw new PrecheckError(`envs.${name}: expected an environment variable name (letters, digits and _, not starting with a digit)`);
    }
  }
  const environment = jobEnvironment(spec, { jobId: params.jobId, attempt: params.attempt, nodeRank: 0, nodeIps: [] });
  if (params.gpusPerNode !== undefined) environment.SKYPILOT_NUM_GPUS_PER_NODE = String(params.gpusPerNode);
  return Object.entries(environment)
    .filter(([name]) => !PER_NODE_VARIABLES.includes(name))
    .map(([name, value]) => `export ${name}=${shellQuote(value)}\n`)
    .join('');
}

/**
 * Single-quoted for bash: any text without NUL is read back exactly, never as code (a
 * quote inside ends the quoting, adds an escaped quote, and starts it again).
 */
export function shellQuote(text: string): string {
  if (text.includes('\0')) throw new RangeError('shellQuote: a NUL cannot be quoted for bash (no shell word holds one)');
  return `'${text.replaceAll("'", `'\\''`)}'`;
}

function oneLine(text: string): string {
  return text.replace(/[\r\n]/g, ' ');
}

/**
 * agent.sh as instances get it: the lines before its settings block and after it, without
 * comment lines (they would take a quarter of user data's 16 KiB gzipped, room a task's
 * setup and run need more), and the names the block sets, in its order. No line of the
 * program that starts with `#` lies inside a quoted string (the python and awk programs
 * have none), so only comments go; the agent tests run what is shipped.
 */
const AGENT = shippedAgent(withoutLibrary(AGENT_SOURCE));

/**
 * The agent's library (agent.sh's block between `# relaunch:library-begin` and `-end`: the
 * tools' signed installs and the log shipper) as the API serves it to a node (`POST
 * .../shipper`), without comment lines, and its SHA-256, which the agent's settings pin:
 * user data has no room for it, and a node loads it only when it ships its output or must
 * install the AWS CLI or mountpoint-s3.
 */
export const AGENT_LIBRARY: { readonly program: string; readonly sha256: string } = libraryOf(AGENT_SOURCE);

function libraryBounds(lines: readonly string[]): [number, number] {
  const begin = lines.indexOf(LIBRARY_BEGIN);
  const end = lines.indexOf(LIBRARY_END);
  if (begin < 0 || end < begin) throw new Error(`agent.sh: expected the agent's library between "${LIBRARY_BEGIN}" and "${LIBRARY_END}"`);
  return [begin, end];
}

function withoutLibrary(source: string): string {
  const lines = source.split('\n');
  const [begin, end] = libraryBounds(lines);
  return [...lines.slice(0, begin), ...lines.slice(end + 1)].join('\n');
}

function libraryOf(source: string): { program: string; sha256: string } {
  const lines = source.split('\n');
  const [begin, end] = libraryBounds(lines);
  const program = `${lines.slice(begin + 1, end).filter((line) => !/^\s*#/.test(line) && line.trim() !== '').join('\n')}\n`;
  return { program, sha256: createHash('sha256').update(program).digest('hex') };
}

function shippedAgent(source: string): { before: string[]; settings: string[]; after: string[] } {
  const lines = source.split('\n');
  const begin = lines.indexOf(SETTINGS_BEGIN);
  const end = lines.indexOf(SETTINGS_END);
  if (begin < 0 || end < begin) throw new Error(`agent.sh: expected a settings block between "${SETTINGS_BEGIN}" and "${SETTINGS_END}"`);
  const settings = lines.slice(begin + 1, end).map((line) => {
    const name = /^declare \+x ([A-Z][A-Z0-9_]*)=''$/.exec(line)?.[1];
    if (name === undefined) throw new Error(`agent.sh: expected declare +x NAME='' in the settings block, got ${line}`);
    return name;
  });
  // The shebang is the renderer's own first line; a shellcheck directive stays, for the check of what ships.
  const code = (part: string[]) => part.filter((line) => (!/^\s*#/.test(line) || /^\s*# shellcheck /.test(line)) && line.trim() !== '');
  return { before: code(lines.slice(0, begin)), settings, after: code(lines.slice(end + 1)) };
}

/** The settings block with the attempt's values, each quoted; every name of the block, no other. */
function settingLines(config: Readonly<Record<string, string | number>>): string[] {
  const given = Object.keys(config).sort();
  const expected = [...AGENT.settings].sort();
  if (given.join() !== expected.join()) throw new Error(`agent.sh sets ${expected.join(', ')}; the renderer gives ${given.join(', ')}`);
  return AGENT.settings.map((name) => `declare +x ${name}=${shellQuote(String(config[name]))}`);
}
