// The API's readers of jobs' output and of the controller's lines (JOB_LOGS), built on first
// use and reused across warm invocations; one CloudWatch Logs client serves both.

import { CloudWatchLogsClient } from '@aws-sdk/client-cloudwatch-logs';
import { CloudWatchControllerLog, CloudWatchJobLogs } from '../../lib/adapters/cloudwatch-job-logs.ts';
import type { ControllerLogReader, JobLogReader } from '../../lib/ports.ts';
import { parseJobLogsConfig } from '../../lib/workflow/env.ts';
import { traced } from '../shared/tracing.ts';

let cachedClient: CloudWatchLogsClient | undefined;
let cachedJobLogs: JobLogReader | undefined;
let cachedControllerLog: ControllerLogReader | undefined;

function client(): CloudWatchLogsClient {
  cachedClient ??= traced(new CloudWatchLogsClient({}));
  return cachedClient;
}

/** The deployment's job log group's reader; undefined on a stack that sets no JOB_LOGS. */
export function jobLogs(): JobLogReader | undefined {
  const config = parseJobLogsConfig();
  if (config?.namePrefix === undefined) return undefined;
  cachedJobLogs ??= new CloudWatchJobLogs({ client: client(), namePrefix: config.namePrefix, region: process.env.AWS_REGION ?? '' });
  return cachedJobLogs;
}

/** The controller functions' log groups' reader; undefined on a stack that sets no JOB_LOGS. */
export function controllerLog(): ControllerLogReader | undefined {
  const config = parseJobLogsConfig();
  if (config?.controllerLogGroups === undefined) return undefined;
  cachedControllerLog ??= new CloudWatchControllerLog({ client: client(), logGroups: config.controllerLogGroups });
  return cachedControllerLog;
}
