// Every relaunch Lambda: its folder under functions/, and what it needs (variables,
// access, timeout). The CDK construct builds each from here; infra/bundle.ts bundles it.

import { fileURLToPath } from 'node:url';
import type { JobSecrets, Workflow } from '../lib/ports.ts';
import { StateName, type TaskStateName } from '../lib/workflow/contract.ts';

/** The handler folders under functions/. */
export const LambdaName = {
  launchAttempt: 'launch-attempt',
  awaitAttempt: 'await-attempt',
  evaluatePolicy: 'evaluate-policy',
  releaseInstances: 'release-instances',
  recordControllerFailure: 'record-controller-failure',
  continueAsNew: 'continue-as-new',
  api: 'api',
  onEc2Event: 'on-ec2-event',
  onExecutionEnded: 'on-execution-ended',
  janitor: 'janitor',
  deleteTransientMounts: 'delete-transient-mounts',
  takeDown: 'take-down',
} as const;
export type LambdaName = (typeof LambdaName)[keyof typeof LambdaName];

/** All Lambdas, in a stable order. */
export const LAMBDA_NAMES: readonly LambdaName[] = Object.values(LambdaName);

/** The Lambda behind each Task state of the controller. */
export const TASK_LAMBDAS: Readonly<Record<TaskStateName, LambdaName>> = {
  [StateName.LaunchAttempt]: LambdaName.launchAttempt,
  // Both waits store their token the same way; the payload names the state.
  [StateName.AwaitBoot]: LambdaName.awaitAttempt,
  [StateName.AwaitAttempt]: LambdaName.awaitAttempt,
  // A standby is launched as any attempt is, with the same grants: one function, and its
  // handler tells the two states apart by their payloads.
  [StateName.LaunchStandby]: LambdaName.launchAttempt,
  [StateName.EvaluateRecoveryPolicy]: LambdaName.evaluatePolicy,
  [StateName.ReleaseInstances]: LambdaName.releaseInstances,
  [StateName.RecordControllerFailure]: LambdaName.recordControllerFailure,
  [StateName.ContinueAsNewExecution]: LambdaName.continueAsNew,
};

/** The repository root (this file is infra/lambda-catalog.ts). */
export const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));

/** The entry file of a Lambda. */
export function handlerEntry(name: LambdaName): string {
  return fileURLToPath(new URL(`../functions/${name}/handler.ts`, import.meta.url));
}

/** Every bundle's entry file (infra/bundle.ts writes it), and the handler Lambda calls in it. */
export const BUNDLE_ENTRY = { file: 'index.mjs', handler: 'index.handler' } as const;

/** A call of the Workflow port a Lambda may make. */
export type WorkflowCall = keyof Workflow;

/** A call of the JobSecrets port a Lambda may make. */
export type JobSecretsCall = keyof JobSecrets;

/** What a Lambda reaches, so the construct sets only its variables and grants only its access. */
export interface LambdaNeeds {
  /** The jobs table: `read` (Get/Query) or `write` (and conditional writes). */
  readonly store: 'read' | 'write';
  /**
   * The Workflow port's calls it makes (STATE_MACHINE_ARN is set when any): each is
   * granted its one Step Functions action, nothing else.
   */
  readonly workflow: readonly WorkflowCall[];
  /** Launches or terminates instances (COMPUTE_CONFIG). */
  readonly compute: 'launch' | 'release' | false;
  /** How long one invocation may take, in seconds. */
  readonly timeoutSeconds: number;
  /** Reads and deletes from the dead-letter queues (DEAD_LETTER_QUEUES). */
  readonly deadLetters?: true;
  /** Lists and deletes the launch templates a launch left behind (the janitor). */
  readonly sweepsLaunchTemplates?: true;
  /**
   * What it does with jobs' secrets (JOB_SECRETS_PATH is set when any): the JobSecrets
   * calls it makes, each granted its one SSM action on that path.
   */
  readonly secrets?: readonly JobSecretsCall[];
  /**
   * Ends jobs, so publishes each one's terminal status to the notifications topic
   * (JOB_NOTIFICATIONS_TOPIC_ARN and sns:Publish on it, when notifications are on).
   */
  readonly notifies?: true;
  /** Reads the stack's data bucket and the buckets instances may use (DATA_CONFIG). */
  readonly data?: true;
  /**
   * Gives nodes sessions of the data access role, each narrowed to its job's data
   * (DATA_ACCESS_ROLE_ARN, and sts:AssumeRole on that role alone).
   */
  readonly givesDataCredentials?: true;
  /**
   * Deletes jobs' `persistent: false` mounts: the buckets `run` created for them (among
   * those instances may use) and their folders of the stack's bucket.
   */
  readonly deletesMounts?: true;
  /** Draws on the shared launch pace, or gives a cancelled job's slot back (LAUNCH_PACE sizes it). */
  readonly paces?: true;
  /**
   * Starts, takes and retires standbys (launch_on_warning), whose writes check the job's
   * live attempt in the same transaction (dynamodb:ConditionCheckItem on the table).
   */
  readonly writesStandbys?: true;
  /**
   * Reads jobs' output and the other functions' lines about a job for `relaunch logs`
   * (JOB_LOGS, and GetLogEvents, FilterLogEvents and DescribeLogStreams on those log groups alone).
   */
  readonly readsLogs?: true;
}

/** Each Lambda's needs; a test checks these against the ports each handler really calls. */
export const LAMBDA_NEEDS: Readonly<Record<LambdaName, LambdaNeeds>> = {
  // Failing over across zones and types with backoff takes a while; 5 min bounds it.
  [LambdaName.launchAttempt]: { store: 'write', workflow: [], compute: 'launch', secrets: ['get'], paces: true, writesStandbys: true, timeoutSeconds: 300 },
  [LambdaName.awaitAttempt]: { store: 'write', workflow: ['resume', 'fail'], compute: false, timeoutSeconds: 30 },
  [LambdaName.evaluatePolicy]: { store: 'write', workflow: [], compute: false, notifies: true, timeoutSeconds: 30 },
  // A release waits at most RELEASE_WAIT_BUDGET_MS (40 s) for instances, plus its EC2 calls.
  // It writes a standby's release (launch_on_warning) when the decision does not need it.
  [LambdaName.releaseInstances]: { store: 'write', workflow: [], compute: 'release', secrets: ['delete'], timeoutSeconds: 150 },
  [LambdaName.recordControllerFailure]: { store: 'write', workflow: [], compute: 'release', secrets: ['delete'], notifies: true, timeoutSeconds: 150 },
  [LambdaName.continueAsNew]: { store: 'write', workflow: ['start'], compute: false, timeoutSeconds: 30 },
  // API Gateway gives up after 29 s. Submit starts; heartbeat, report and cancel answer the
  // task; a cancel also stops an execution that is in a Wait.
  [LambdaName.api]: {
    store: 'write',
    workflow: ['start', 'resume', 'fail', 'heartbeat', 'stopBetweenSteps'],
    compute: false,
    // A submit stores the job's secrets, and deletes them when its execution cannot start
    // (it then ends the job) or an earlier submit with the same key made the job.
    secrets: ['put', 'delete'],
    notifies: true,
    data: true,
    givesDataCredentials: true,
    paces: true,
    readsLogs: true,
    timeoutSeconds: 29,
  },
  // A warning that asks for a standby (launch_on_warning) fails AwaitAttempt with StandbyWanted.
  [LambdaName.onEc2Event]: { store: 'write', workflow: ['resume', 'fail'], compute: false, timeoutSeconds: 30 },
  // Releases the instances of an execution that ended outside its states, as RecordControllerFailure does.
  [LambdaName.onExecutionEnded]: { store: 'write', workflow: [], compute: 'release', secrets: ['delete'], notifies: true, timeoutSeconds: 150 },
  // Replays dead letters (which may resume a task or release instances), then sweeps
  // for SWEEP_BUDGET_SECONDS (180 s) plus the last release's wait (40 s at most).
  // A replayed execution end can end a job. It starts the executions of queued jobs
  // (a submit whose StartExecution was throttled). A replayed warning may ask for a
  // standby (launch_on_warning), as on-ec2-event's does.
  [LambdaName.janitor]: {
    store: 'write',
    workflow: ['resume', 'fail', 'start'],
    compute: 'release',
    deadLetters: true,
    sweepsLaunchTemplates: true,
    secrets: ['delete'],
    notifies: true,
    timeoutSeconds: 300,
  },
  // Emptying a bucket is a page of 1,000 objects a round; a bucket larger than 15 minutes
  // empties goes on in Lambda's retry of the invocation, where this one stopped.
  [LambdaName.deleteTransientMounts]: { store: 'read', workflow: [], compute: false, data: true, deletesMounts: true, timeoutSeconds: 900 },
  // `cdk destroy`'s custom resource: releases every instance of the deployment (ten
  // attempts at a time, each waiting up to 40 s for its instances to go), deletes its
  // launch templates, and ends every live job; CloudFormation waits for its answer.
  [LambdaName.takeDown]: {
    store: 'write',
    workflow: [],
    compute: 'release',
    sweepsLaunchTemplates: true,
    secrets: ['delete'],
    notifies: true,
    timeoutSeconds: 900,
  },
};
