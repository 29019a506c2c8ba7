// The use cases: what relaunch does, each through ports only, shared by the Lambdas and the local runtime.

export type { UseCaseDeps } from './deps.ts';
export { submitJob, type SubmitJobInput, type SubmitJobResult } from './submit-job.ts';
export { launchAttempt } from './launch-attempt.ts';
export { awaitAttempt, CANCELLED_BY_USER } from './await-attempt.ts';
export { reportPhase, type ReportPhaseInput, type ReportPhaseResult } from './report-phase.ts';
export { heartbeat, type HeartbeatInput } from './heartbeat.ts';
export { issueDataCredentials } from './data-credentials.ts';
export type { AgentCredentials } from './agent.ts';
export { onInstanceEvent, type InstanceEvent, type InstanceEventResult } from './instance-event.ts';
export { evaluatePolicy } from './evaluate-policy.ts';
export { releaseInstances } from './release-instances.ts';
export { recordControllerFailure, type ControllerFailureState } from './controller-failure.ts';
export { continueAsNew } from './continue-as-new.ts';
export { cancelJob, type CancelJobResult } from './cancel-job.ts';
export { onExecutionEnded, type ExecutionEnded, type ExecutionEndedResult, type ExecutionEndStatus } from './execution-ended.ts';
export { deleteTransientMounts, type DeletedMount } from './job-buckets.ts';
export { getJob, listJobs } from './queries.ts';
