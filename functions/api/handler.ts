// The REST API (API Gateway proxy integration): adapt the event, let lib/http answer.

import { ec2TaskProblems } from '../../lib/adapters/ec2-user-data.ts';
import { SOURCES_PREFIX } from '../../lib/workflow/resources.ts';
import { portProblems } from '../../lib/task-file/network-ports.ts';
import * as z from '../../lib/zod.ts';
import { handleApiRequest } from '../../lib/http/handle.ts';
import { matchRoute } from '../../lib/http/routes.ts';
import { EnvVar, parseDataConfig, parseNodeToNodeTraffic, parseOpenPorts } from '../../lib/workflow/env.ts';
import { nodeTrafficProblems } from '../../lib/adapters/ec2-network.ts';
import type { DataAccess, LogAccess } from '../../lib/ports.ts';
import type { ApiResponse } from '../../lib/http/types.ts';
import { clock, jobSecrets, pace, random, store, workflow } from '../shared/deps.ts';
import { lambdaHandler } from '../shared/invocation.ts';
import { withJob } from '../shared/log.ts';
import { announceJobEnded } from '../shared/notify.ts';
import { controllerLog, jobLogs } from './job-logs.ts';
import { parseEvent } from '../shared/parse.ts';

/** The parts of API Gateway's REST proxy event the API reads. */
const ProxyEventSchema = z.object({
  httpMethod: z.string(),
  path: z.string(),
  headers: z.nullish(z.record(z.string(), z.string())),
  queryStringParameters: z.nullish(z.record(z.string(), z.string())),
  body: z.nullish(z.string()),
  isBase64Encoded: z.nullish(z.boolean()),
  /** Who signed the request: IAM routes carry the caller's ARN, agent routes none. */
  requestContext: z.nullish(z.object({ identity: z.nullish(z.object({ userArn: z.nullish(z.string()) })) })),
});

/** The stack's data bucket and the buckets instances may use, read once per container. */
const dataConfig = parseDataConfig();

/**
 * The nodes' credentials for their jobs' S3 data, where the stack has an access role; its
 * module (and STS client) loads with the first ask.
 */
const dataAccess: DataAccess | undefined =
  (process.env[EnvVar.dataAccessRoleArn] ?? '') === ''
    ? undefined
    : { credentialsFor: async (job, attempt) => (await import('../shared/data-access.ts')).dataAccess().credentialsFor(job, attempt) };

/** The nodes' credentials for their own log streams, where the stack has a job log group. */
const logAccess: LogAccess | undefined =
  (process.env[EnvVar.jobLogs] ?? '') === '' || (process.env[EnvVar.dataAccessRoleArn] ?? '') === ''
    ? undefined
    : { credentialsFor: async (job, attempt, nodeRank) => (await import('../shared/data-access.ts')).logAccess().credentialsFor(job, attempt, nodeRank) };

/** One request in, one response out; never throws for a bad request (lib/http maps errors). */
export const handler = lambdaHandler(async (event, log): Promise<ApiResponse> => {
  const request = parseEvent(ProxyEventSchema, event, 'event');
  logJobOfPath(request.httpMethod, request.path);
  const query = new URLSearchParams(request.queryStringParameters ?? {}).toString();
  const body = request.body ?? undefined;
  const response = await handleApiRequest(
    {
      method: request.httpMethod,
      path: query === '' ? request.path : `${request.path}?${query}`,
      headers: request.headers ?? {},
      body: body !== undefined && request.isBase64Encoded === true ? Buffer.from(body, 'base64').toString('utf8') : body,
      caller: request.requestContext?.identity?.userArn ?? undefined,
    },
    {
      store: store(),
      secrets: jobSecrets(),
      workflow: workflow(),
      // A cancel gives back the launch slot its job waited for.
      pace: pace(),
      clock,
      random,
      computeProblems: async (spec) => [
        ...ec2TaskProblems(spec, dataConfig),
        ...portProblems(spec, parseOpenPorts()),
        ...nodeTrafficProblems(spec, parseNodeToNodeTraffic()),
      ],
      onJobEnded: announceJobEnded,
      jobLogs: jobLogs(),
      controllerLog: controllerLog(),
      ...(dataAccess === undefined ? {} : { dataAccess }),
      ...(logAccess === undefined ? {} : { logAccess }),
      ...(dataConfig === undefined ? {} : { sources: { bucket: dataConfig.bucket, prefix: SOURCES_PREFIX, region: process.env.AWS_REGION ?? '', allowedBuckets: dataConfig.allowedBuckets } }),
      onUnexpectedError: (error, req) => log.error('request failed', { method: req.method, path: request.path, error: error as Error }),
    },
  );
  log.info('request answered', { method: request.httpMethod, path: request.path, statusCode: response.statusCode });
  return response;
});

/** A route under `/jobs/{id}` (and `/attempts/{n}`) names its job: every line of the request carries it. */
function logJobOfPath(method: string, path: string): void {
  const match = matchRoute(method, path);
  if (match === undefined || !('params' in match) || match.params.id === undefined) return;
  const attempt = Number(match.params.n);
  withJob(Number.isInteger(attempt) ? { jobId: match.params.id, attempt } : { jobId: match.params.id });
}
