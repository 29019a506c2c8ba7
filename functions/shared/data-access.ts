// The API's DataAccess and LogAccess, apart from deps.ts: the API loads it (and its STS client) with the
// first ask for data credentials, so heartbeats and reports cold-start without it.

import { STSClient } from '@aws-sdk/client-sts';
import { StsDataAccess, StsLogAccess } from '../../lib/adapters/sts-data-access.ts';
import type { DataAccess, LogAccess } from '../../lib/ports.ts';
import { ConfigurationError } from '../../lib/errors.ts';
import { EnvVar, parseDataConfig, parseJobLogsConfig, requireEnv } from '../../lib/workflow/env.ts';
import { traced } from './tracing.ts';

let cached: DataAccess | undefined;

/** Sessions of DATA_ACCESS_ROLE_ARN narrowed to each job's data (DATA_CONFIG). */
export function dataAccess(): DataAccess {
  if (cached === undefined) {
    const data = parseDataConfig();
    if (data === undefined) throw new ConfigurationError(`environment variable ${EnvVar.dataConfig} is not set; the relaunch stack sets it with ${EnvVar.dataAccessRoleArn}`);
    cached = new StsDataAccess({ sts: traced(new STSClient({})), roleArn: requireEnv(EnvVar.dataAccessRoleArn), data });
  }
  return cached;
}

let cachedLogs: LogAccess | undefined;

/** Sessions of DATA_ACCESS_ROLE_ARN narrowed to each node's own streams of the job log group (JOB_LOGS). */
export function logAccess(): LogAccess {
  if (cachedLogs === undefined) {
    const logs = parseJobLogsConfig();
    if (logs === undefined) throw new ConfigurationError(`environment variable ${EnvVar.jobLogs} is not set; the relaunch stack sets it with ${EnvVar.dataAccessRoleArn}`);
    cachedLogs = new StsLogAccess({ sts: traced(new STSClient({})), roleArn: requireEnv(EnvVar.dataAccessRoleArn), logs });
  }
  return cachedLogs;
}
