// Ports: the small interfaces the use cases need from the outside world, named by role.

import type { ProcessCredentials } from './agent/protocol.ts';
import type { DecisionBasis } from './outcome.ts';
import type { AttemptOutcome, Market, RecoveryCounters } from './policy/types.ts';
import type { TaskSpec } from './task-file/types.ts';
import type { JobStatus } from './status.ts';
import type { AwaitStateName, ExecutionInput } from './workflow/contract.ts';
import type { JobLogStream } from './job-log-names.ts';
import type {
  AttemptRecord,
  InstanceRef,
  JobEvent,
  JobRecord,
  NodeReport,
  PipelineState,
  Placement,
  ProgressMark,
  StoredDecision,
} from './model.ts';

/** The time; injected so tests control it. */
export interface Clock {
  now(): Date;
  /**
   * Resolves once `ms` of this clock's time have passed: a bounded wait inside a use case
   * (a failing node's peers' codes). @default real time (setTimeout)
   */
  sleep?(ms: number): Promise<void>;
}

/** A uniform draw in [0, 1); injected so backoff jitter is testable. */
export type Random = () => number;

/** A status change with its audit reason, applied only if the job is in `from`. */
export interface StatusChange {
  readonly from: JobStatus;
  readonly to: JobStatus;
  readonly reason: string;
  readonly attempt: number | null;
  readonly at: string;
}

/**
 * Where jobs and attempts live. Every write that changes status is conditional on the
 * expected current status and throws ConcurrentUpdateError when it is not; a missing job
 * is JobNotFoundError.
 */
export interface JobStore {
  /** Creates the job; throws ConcurrentUpdateError if the id exists. */
  createJob(job: JobRecord): Promise<void>;
  /**
   * Creates the job and claims `claim.key` for it, in one atomic write, unless a claim on
   * that key is held that has not lapsed at `now` (ISO 8601): then nothing is written.
   * Returns the claim that holds the key afterwards: `claim` itself when the job was
   * created (compare the job ids). A lapsed claim is replaced. Throws ConcurrentUpdateError
   * if the job id exists, or if the holding claim lapsed or vanished between the refused
   * write and its read (a retry decides afresh).
   */
  createJobOnce(job: JobRecord, claim: IdempotencyClaim, now: string): Promise<IdempotencyClaim>;
  /** The job as stored; throws JobNotFoundError when there is none. */
  getJob(jobId: string): Promise<JobRecord>;
  /** Newest first. */
  listJobs(options?: { limit?: number }): Promise<JobRecord[]>;
  /** Changes status (with its EVENT row) atomically; returns the updated job. */
  changeStatus(jobId: string, change: StatusChange, patch?: JobPatch): Promise<JobRecord>;
  /** Records the execution that controls the job; the job leaves the queue (listQueued). */
  setExecution(jobId: string, executionArn: string): Promise<void>;
  /**
   * Jobs whose execution is not recorded yet, oldest first: a job is in this queue from
   * its creation until its execution is recorded or it ends. One may have started or
   * ended since (read it again).
   */
  listQueued(options: { limit: number }): Promise<JobRecord[]>;

  /**
   * Starts attempt `attempt.attempt`: writes it and bumps the job's attemptCount, only if
   * the job's attemptCount is `attempt.attempt - 1`.
   */
  putAttempt(attempt: AttemptRecord): Promise<void>;
  /** One attempt of a job; throws StaleAttemptError when the job has no such attempt. */
  getAttempt(jobId: string, attempt: number): Promise<AttemptRecord>;
  /** Every attempt of a job, oldest first. */
  listAttempts(jobId: string): Promise<AttemptRecord[]>;
  /** Finds the attempt that owns an instance (the GSI); null when none does. */
  findAttemptByInstance(instanceId: string): Promise<AttemptRecord | null>;
  /** Records the placement and instances once a launch succeeded. */
  setInstances(jobId: string, attempt: number, placement: Placement, instances: readonly InstanceRef[]): Promise<void>;
  /**
   * Stores the task token, even on an attempt that has ended, and returns the attempt as it
   * now is: the caller sees `outcome` and resumes the task itself when the end came first.
   */
  setTaskToken(jobId: string, attempt: number, taskToken: string, state: AwaitStateName): Promise<AttemptRecord>;
  /**
   * Adds a report unless that node already reported that phase or the attempt has ended (a
   * stopped phase's report, which decides nothing, is added after the end too).
   * Returns `duplicate: true` (and changes nothing) for a repeat.
   */
  addReport(jobId: string, attempt: number, report: NodeReport): Promise<{ attempt: AttemptRecord; duplicate: boolean }>;
  /**
   * Sets the attempt's lastHeartbeatAt to `at`, adds `nodeRank` to its nodesHeardFrom, notes
   * `at` as that node's first heartbeat unless one is noted, and sets the job's `progress`
   * when the beat carried one, and returns the attempt, in one write; throws
   * StaleAttemptError when the attempt has ended (a late beat changes nothing).
   */
  recordHeartbeat(jobId: string, attempt: number, at: string, nodeRank: number, progress?: ProgressMark): Promise<AttemptRecord>;
  /** Notes when the controller first asked the attempt's instances to stop (kept once, ended or not). */
  noteStopAsked(jobId: string, attempt: number, at: string): Promise<void>;
  /** Notes when the attempt's released instances were gone (kept once: the first note wins, ended or not). */
  noteInstancesGone(jobId: string, attempt: number, at: string): Promise<void>;
  /**
   * Notes EC2's spot interruption warning, and the rank of the node it named when known, in
   * one write (first one wins); returns the attempt.
   */
  noteInterruption(jobId: string, attempt: number, at: string, nodeRank?: number): Promise<AttemptRecord>;
  /** Notes EC2's rebalance recommendation and its node's rank, as noteInterruption (none once ended). */
  noteRebalance(jobId: string, attempt: number, at: string, nodeRank?: number): Promise<AttemptRecord>;

  /**
   * Starts attempt `attempt.attempt` as a standby (its `standby` mark set) beside the live
   * attempt `attempt.standby.for`: written only if the job's attemptCount is that live
   * attempt and no attempt of this number exists. The job's attemptCount is left as it is:
   * the warned attempt stays the live one. ConcurrentUpdateError otherwise.
   */
  putStandby(attempt: AttemptRecord): Promise<void>;
  /**
   * Makes standby `attempt` the job's live attempt: attemptCount moves from `attempt - 1`
   * to `attempt` and the standby is marked adopted at `at`, in one write, only while it is
   * neither adopted nor released. ConcurrentUpdateError otherwise. `kept`: the nodes of
   * the attempt before that join it (a standby launched beside them, reusedFrom set), added
   * to its instances with their instance index moved to it, in that same write.
   */
  adoptStandby(jobId: string, attempt: number, at: string, kept?: readonly InstanceRef[]): Promise<AttemptRecord>;
  /**
   * Lets standby `attempt` go unused: marked released at `at` for `reason` (and ended then,
   * unless it had ended already), only while it is neither adopted nor released. Returns
   * the attempt as it now is, and whether this call released it.
   */
  releaseStandby(jobId: string, attempt: number, at: string, reason: string): Promise<{ attempt: AttemptRecord; released: boolean }>;
  /**
   * Moves the job's attemptCount past released standby `attempt` (from `attempt - 1` to
   * `attempt`), so the next launch is `attempt + 1`: the job relaunches without it.
   * ConcurrentUpdateError unless attemptCount is `attempt - 1` and the standby is released.
   */
  retireStandby(jobId: string, attempt: number): Promise<void>;
  /** Notes when a node of the attempt was first told to start run (kept once). */
  noteRunStart(jobId: string, attempt: number, at: string): Promise<void>;
  /**
   * Sets the outcome only if none is set yet and, when `basis` is given, only if the attempt
   * still holds exactly the facts the outcome was decided on (no report added, no warning
   * noted since). Returns whether this call set it, and the attempt as it now is: refused
   * with no outcome set means the facts changed, and the caller decides again on them.
   */
  endAttempt(
    jobId: string,
    attempt: number,
    outcome: AttemptOutcome,
    at: string,
    basis?: DecisionBasis,
  ): Promise<{ attempt: AttemptRecord; won: boolean }>;
  /**
   * The policy's decision, in one transaction: the decision on the attempt, the job's new
   * counters and status, and the EVENT row; conditional on the job's expected status.
   * `patch.failureReason` (given with a FAIL) is set in the same write; when absent, the
   * job's failure reason is left as it is.
   */
  recordDecision(
    jobId: string,
    attempt: number,
    decision: StoredDecision,
    counters: RecoveryCounters,
    change: StatusChange,
    patch?: Pick<JobPatch, 'failureReason' | 'nextTask'>,
  ): Promise<JobRecord>;
  /** The audit trail, oldest first. */
  listEvents(jobId: string): Promise<JobEvent[]>;
}

/**
 * A submit's hold on an idempotency key: which job the key made, and what was asked for,
 * so that a repeat is answered with that job and a different request is refused.
 */
export interface IdempotencyClaim {
  /** Opaque to the store, fixed length: the use case digests the caller and their key into it. */
  readonly key: string;
  readonly jobId: string;
  /** A digest of the request's task: a repeat must ask for the same one. */
  readonly fingerprint: string;
  /** ISO 8601: from then on the claim has lapsed and the key may make a new job. */
  readonly expiresAt: string;
}

/** Fields that may change with a status change. */
export interface JobPatch {
  readonly failureReason?: string | null;
  readonly counters?: RecoveryCounters;
  /** A pipeline moving on: its next task becomes the job's spec. */
  readonly nextTask?: { readonly spec: TaskSpec; readonly pipeline: PipelineState };
}

/**
 * The account's launch pace, shared by every execution: EC2 refills its instance-launch
 * bucket at a fixed rate, so launches beyond its burst are given later slots instead of
 * being throttled. Kept in the store, so all executions draw on one bucket.
 */
export interface LaunchPace {
  /**
   * Takes `instances` launch tokens and returns when the launch may go (ms since the
   * epoch): `now` or earlier when the bucket had them, else the slot reserved for it. The
   * caller waits until then and launches without reserving again. A later slot is noted
   * for `holder` (a job id), so that `release` can give it back.
   */
  reserve(instances: number, now: number, holder?: string): Promise<number>;
  /**
   * Gives back the slot `holder` was given, if it is still ahead of `now`: the launch will
   * not happen (its job was cancelled while it waited), and the launches after it may go
   * sooner. Whether a slot was given back; a second call gives back nothing.
   */
  release(holder: string, now: number): Promise<boolean>;
}

/** What deleting a bucket at a job's end came to. */
export type BucketDeletion = 'deleted' | 'kept' | 'gone';

/**
 * Where a job's `persistent: false` mounts go when it ends: S3 on AWS, the data folder's
 * bucket folders locally. Both deletions may be run again (a retried event).
 */
export interface JobBuckets {
  /**
   * Empties and deletes bucket `name` if relaunch created it for job `jobId` (`run` marked
   * it so after the submit): 'kept' when it did not, 'gone' when there is no such bucket.
   */
  deleteCreatedBucket(name: string, jobId: string): Promise<BucketDeletion>;
  /** Deletes the folder of relaunch's own bucket that holds the job's nameless mount at `path`. */
  deleteJobFolder(jobId: string, path: string): Promise<void>;
}

/**
 * Credentials for a job's S3 data (AWS: its nodes' instance role has none): each job's
 * credentials reach only its own uploads, the prefixes it copies and the ones it mounts.
 */
export interface DataAccess {
  /**
   * Credentials for a node of attempt `attempt` of `job`, good for about an hour.
   * InvalidInputError when the job's task has no S3 data to reach.
   */
  credentialsFor(job: JobRecord, attempt: number): Promise<ProcessCredentials>;
}

/** Gives a node credentials to ship its phases' output into its own CloudWatch Logs streams. */
export interface LogAccess {
  /**
   * Credentials for node `nodeRank` of attempt `attempt` of `job`, good for about an hour:
   * CreateLogStream and PutLogEvents on that node's streams of that attempt, nothing else.
   */
  credentialsFor(job: JobRecord, attempt: number, nodeRank: number): Promise<ProcessCredentials>;
}

/** A job that reached a terminal status, for whoever counts and announces ends. */
export interface JobEnded {
  readonly jobId: string;
  readonly status: JobStatus;
  readonly reason: string;
  /** The attempt that ended it; absent when the job never launched one, or the step that ended it does not say. */
  readonly attempt?: number;
  /** useful run time / wall time, 0-1 (lib/accounting); absent when not worked out. */
  readonly goodput?: number | null;
  /** The instances' cost on their markets and on demand, US dollars; absent when not worked out. */
  readonly cost?: { readonly dollars: number | null; readonly onDemandDollars: number | null; readonly estimate: boolean };
  /** `goodput 91% · 3 recoveries · $41.20 spot ($128.70 on demand)`. */
  readonly summary?: string;
}

/**
 * Where a job's end is announced to the people who run it (on AWS, an SNS topic they
 * subscribe to). At least once, not exactly once: a step the state machine retries after
 * it announced announces again.
 */
export interface JobNotifier {
  /** Where announcements go, for log lines: the topic's ARN. */
  readonly destination: string;
  /** Announces `ended`; throws when it could not. */
  jobEnded(ended: JobEnded): Promise<void>;
}

/**
 * Where a job's secret values live from its submit to its end, never in its record:
 * SSM SecureStrings on AWS, a file only the user can read locally.
 */
export interface JobSecrets {
  put(jobId: string, values: Readonly<Record<string, string>>): Promise<void>;
  /** The job's values; {} when none are stored. */
  get(jobId: string): Promise<Readonly<Record<string, string>>>;
  /** Forgets them; a job with none stored is fine. */
  delete(jobId: string): Promise<void>;
}

/** What a launch asks for. */
export interface LaunchRequest {
  readonly jobId: string;
  readonly attempt: number;
  readonly spec: TaskSpec;
  readonly market: Market;
  /** Placements of earlier attempts, newest first, with how each ended. */
  readonly history: readonly { readonly placement: Placement; readonly outcome: AttemptOutcome['kind'] | null }[];
  /** The per-attempt secret the agent proves itself with. */
  readonly callbackSecret: string;
  /** The task's secrets, for the job's environment only; absent when it has none. */
  readonly secrets?: Readonly<Record<string, string>>;
  /**
   * The nodes the decided attempt before this one keeps (its decision's `keep`): the launch
   * runs them again as this attempt (their callback secret rewritten, their tags moved to
   * it, no boot) and launches only the ranks they do not cover, in `placement` (same zone,
   * type and placement group). A kept node found gone is launched anew too. Absent: every
   * node is new, placed as the strategy says.
   */
  readonly keep?: { readonly placement: Placement; readonly nodes: readonly InstanceRef[] };
  /**
   * A standby of the warned node alone (StandbyMark.beside): `nodes` still serve the live
   * attempt and join this one only when it is adopted (Compute.join). The launch places
   * only the ranks they do not cover, in `placement` beside them, every node's IP known to
   * the new ones; it writes this attempt's secret to their parameters too (their agents read
   * it only once told to run it), and leaves their tags and instances alone. A node of
   * theirs found gone is not replaced: the relaunch, which replaces it, lets such a
   * standby go. Absent (and always with `keep`): an ordinary launch.
   */
  readonly beside?: { readonly placement: Placement; readonly nodes: readonly InstanceRef[] };
}

/** A launch that worked. */
export interface LaunchResult {
  readonly placement: Placement;
  readonly instances: readonly InstanceRef[];
}

/**
 * Where attempts run: EC2 instances, or local processes. `launch` throws
 * NoCapacityError when no placement had capacity, and PrecheckError for a spec the
 * compute cannot run at all (unknown instance type, bad image); both end the job.
 */
export interface Compute {
  launch(request: LaunchRequest): Promise<LaunchResult>;
  /**
   * Terminates the instances, and any other the attempt's tags name, but those in
   * `except` (nodes kept for the next attempt); idempotent; resolves once they are gone or going.
   */
  release(jobId: string, attempt: number, instances: readonly InstanceRef[], options?: { readonly except?: readonly string[] }): Promise<void>;
  /**
   * Tells the kept nodes of `attempt` (ended and decided) that their job is over but not the
   * node: each agent stops what still runs, proves it gone, and asks what to do next
   * (`POST .../next`). On EC2 and locally, the held-after tag (lib/agent/tags.ts). Idempotent.
   */
  hold(jobId: string, attempt: number, keep: { readonly placement: Placement; readonly nodes: readonly InstanceRef[] }): Promise<void>;
  /**
   * Makes the kept nodes among `nodes` (reusedFrom set) serve `attempt`, an adopted standby
   * launched beside them (LaunchRequest.beside): each tagged with the attempt, and every
   * node with its rank and every IP, as a launch with `keep` would; their secret is the
   * standby's already, written by its launch. `nodes` are all the attempt's. Idempotent.
   */
  join(jobId: string, attempt: number, placement: Placement, nodes: readonly InstanceRef[]): Promise<void>;
}

/** A live instance that carries relaunch's job tag, as EC2 describes it. */
export interface TaggedInstance {
  readonly instanceId: string;
  readonly region: string;
  readonly jobId: string;
  /** From the attempt tag; null when the tag is missing or not a number. */
  readonly attempt: number | null;
  /** When EC2 launched it (ISO 8601); null when EC2 did not say. */
  readonly launchedAt: string | null;
}

/** Every live instance relaunch tagged, wherever it may launch (the janitor's sweep). */
export interface InstanceInventory {
  listTagged(): Promise<TaggedInstance[]>;
}

/** A launch template relaunch made for an attempt, as EC2 lists it. */
export interface TaggedLaunchTemplate {
  readonly templateId: string;
  readonly region: string;
  readonly jobId: string;
  /** When EC2 made it (ISO 8601); null when EC2 did not say. */
  readonly createdAt: string | null;
}

/**
 * The launch templates relaunch tagged, wherever it launches: a launch deletes its own,
 * and the janitor those a launch that died left behind.
 */
export interface LaunchTemplateInventory {
  listTagged(): Promise<TaggedLaunchTemplate[]>;
  /** Deletes one; one already gone is fine. */
  delete(template: TaggedLaunchTemplate): Promise<void>;
}

/** An event a delivery gave up on, kept in a dead-letter queue. */
export interface DeadLetter {
  /** The queue it came from, as the deployment names it. */
  readonly queue: string;
  /** The message body: the event, or Lambda's on-failure record around it. */
  readonly body: string;
  /** How many times it has been received, this time included. */
  readonly receiveCount: number;
  /** What `remove` needs to delete this receipt of it. */
  readonly receipt: string;
}

/** The dead-letter queues of relaunch's event deliveries. */
export interface DeadLetters {
  /** Up to `max` letters from every queue, each hidden from other readers for a while. */
  receive(max: number): Promise<DeadLetter[]>;
  /** Deletes a letter once it has been applied. */
  remove(letter: DeadLetter): Promise<void>;
}

/** The controller's execution: start it, and resume its waiting task. */
export interface Workflow {
  /**
   * Starts an execution with this name (the job id, or the job id and attempt when
   * continuing as new); returns its ARN. Starting the same name twice starts one.
   */
  start(executionName: string, input: ExecutionInput): Promise<string>;
  /**
   * Resumes the waiting task with `output` as its result (SendTaskSuccess); throws
   * StaleAttemptError when the task has already ended.
   */
  resume(taskToken: string, output: unknown): Promise<void>;
  /** Resumes the waiting task with an error its Catch matches by name. */
  fail(taskToken: string, error: string, cause: string): Promise<void>;
  /**
   * Tells the waiting task its attempt is alive, restarting its heartbeat timeout; throws
   * StaleAttemptError when the task has already ended.
   */
  heartbeat(taskToken: string): Promise<void>;
  /**
   * Stops the execution where no step of it runs (at once in a Wait between attempts: a
   * backoff, a wait for capacity), so a cancel need not wait for the Wait to end; `cause`
   * is recorded with the stop. Resolves whether it will stop. Whoever watches executions
   * end (the janitor, `onExecutionEnded`) then finishes the job.
   */
  stopBetweenSteps(executionArn: string, cause: string): Promise<boolean>;
}

/** A page of one node's phase output, as a JobLogReader read it. */
export interface JobLogPage {
  /** The output read, whole lines where the reader can tell them; '' when nothing new was there. */
  readonly text: string;
  /** Where the next read of the stream starts, in the reader's own terms (a byte offset, CloudWatch's forward token). */
  readonly position: string;
}

/**
 * Reads the output nodes wrote, one node's phase at a time (`JobLogStream`): the local
 * runtime's log files, or a deployment's CloudWatch Logs streams.
 */
export interface JobLogReader {
  /**
   * The stream's output from `position` (null: its start), at most `maxBytes` of it unless
   * one line alone is longer. A stream nothing was written to yet reads as '' and stays
   * where it was. Throws InvalidInputError (path `cursor`) for a position it cannot read from.
   */
  read(stream: JobLogStream, position: string | null, maxBytes: number): Promise<JobLogPage>;
  /** The stream's page in the AWS console; null where there is none (a local runtime). */
  consoleUrl(stream: JobLogStream): string | null;
}

/** One line a controller function logged for a job. */
export interface ControllerLogLine {
  /** ISO 8601, when it was logged. */
  readonly at: string;
  /** Which function logged it (its log group). */
  readonly source: string;
  readonly message: string;
}

/** Reads what the controller's functions logged about a job (a deployment's Lambdas' log groups). */
export interface ControllerLogReader {
  /**
   * The lines naming `jobId` logged since `since` (ISO 8601), oldest first, at most
   * `maxLines`; `complete` is false when there were more.
   */
  linesOf(jobId: string, since: string, maxLines: number): Promise<{ readonly lines: readonly ControllerLogLine[]; readonly complete: boolean }>;
}
