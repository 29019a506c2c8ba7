// `relaunch logs` on a stack deployed onto moto: the API's own function reads a job's
// output (written with PutLogEvents as the shipper writes it) and the controller functions'
// lines about the job, each call checked against the API role's policy from the template.

import { CloudWatchLogsClient, CreateLogGroupCommand, CreateLogStreamCommand, PutLogEventsCommand } from '@aws-sdk/client-cloudwatch-logs';
import { beforeAll, describe, expect, it } from 'vitest';
import { jobLogGroupName, jobLogStreamName } from '../../../lib/job-log-names.ts';
import { EnvVar } from '../../../lib/workflow/env.ts';
import type { JobLogsConfig } from '../../../lib/workflow/resources.ts';
import { useWorld, type StackInWorld } from './world.ts';

const world = useWorld();
let stack: StackInWorld;
let logs: CloudWatchLogsClient;
let jobId: string;

async function put(group: string, stream: string, messages: readonly string[], create: { group: boolean }): Promise<void> {
  if (create.group) await logs.send(new CreateLogGroupCommand({ logGroupName: group })).catch((error: Error) => (error.name === 'ResourceAlreadyExistsException' ? undefined : Promise.reject(error)));
  await logs.send(new CreateLogStreamCommand({ logGroupName: group, logStreamName: stream }));
  const now = Date.now();
  await logs.send(new PutLogEventsCommand({ logGroupName: group, logStreamName: stream, logEvents: messages.map((message, index) => ({ timestamp: now + index, message })) }));
}

beforeAll(async () => {
  stack = await world().deploy();
  logs = new CloudWatchLogsClient({ region: stack.deployment.region, endpoint: world().moto.endpoint });
  const ami = await world().amazonLinuxAmi();
  jobId = await stack.submit(`name: train\nresources:\n  cpus: 2\n  image_id: ${ami}\nrun: python train.py\n`);
  await stack.awaiting(jobId, 1, 'AwaitBoot');
});

describe('reading a job through the deployed API on moto', () => {
  it("pages a node's run output from the job log group with its own role, and gives each log's console link", async () => {
    const stream = jobLogStreamName({ jobId, attempt: 1, nodeRank: 0, phase: 'run' });
    await put(jobLogGroupName('relaunch'), stream, ['epoch 1', 'epoch 2'], { group: true });

    const first = await stack.api('GET', `/jobs/${jobId}/logs?attempt=1&node=0&phase=run`);
    expect(first.statusCode, JSON.stringify(first.body)).toBe(200);
    expect(first.body).toMatchObject({ jobId, attempt: 1, nodeRank: 0, phase: 'run', text: 'epoch 1\nepoch 2\n' });
    expect(first.body.consoleUrl).toContain('#logsV2:log-groups/log-group/$252Frelaunch$252Fjobs/log-events/');
    const next = await stack.api('GET', `/jobs/${jobId}/logs?attempt=1&node=0&phase=run&cursor=${String(first.body.cursor)}`);
    expect(next.body.text).toBe('');
    const setup = await stack.api('GET', `/jobs/${jobId}/logs?attempt=1&node=0&phase=setup`);
    expect(setup.body.text).toBe('');
    expect((await stack.job(jobId)).logStreams).toHaveLength(2);
  });

  it("finds the controller functions' lines naming the job in their log groups", async () => {
    const config = JSON.parse(stack.deployment.functions.api.environment[EnvVar.jobLogs] ?? '{}') as JobLogsConfig;
    const group = config.controllerLogGroups?.['launch-attempt'] as string;
    await put(group, '2026/12/07/[$LATEST]abc', [JSON.stringify({ level: 'INFO', message: 'fleet created', jobId }), JSON.stringify({ level: 'INFO', message: 'fleet created', jobId: 'j-0m8x2k1qz-other0' })], { group: true });

    const answer = await stack.api('GET', `/jobs/${jobId}/controller-log`);
    expect(answer.statusCode, JSON.stringify(answer.body)).toBe(200);
    const lines = answer.body.lines as { source: string; message: string }[];
    expect(lines.map((line) => [line.source, (JSON.parse(line.message) as { message: string }).message])).toEqual([['launch-attempt', 'fleet created']]);
  });
});
