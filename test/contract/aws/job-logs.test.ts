// The job log readers against moto_server's CloudWatch Logs, with moto's authentication on:
// the streams written with PutLogEvents as the agent's shipper writes them (one event a line,
// no newline), read back a page at a time as the API's route reads them, with a reader whose
// keys may only read; and the controller's lines found by the job's id.

import {
  CloudWatchLogsClient,
  CreateLogGroupCommand,
  CreateLogStreamCommand,
  PutLogEventsCommand,
} from '@aws-sdk/client-cloudwatch-logs';
import { CreateAccessKeyCommand, CreateUserCommand, IAMClient, PutUserPolicyCommand } from '@aws-sdk/client-iam';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CloudWatchControllerLog, CloudWatchJobLogs } from '../../../lib/adapters/cloudwatch-job-logs.ts';
import { InvalidInputError } from '../../../lib/errors.ts';
import type { JobLogReader } from '../../../lib/ports.ts';
import { jobLogGroupName, jobLogStreamName, type JobLogStream } from '../../../lib/job-log-names.ts';
import { startMoto, type Moto } from './moto.ts';

const REGION = 'us-east-1';
const PREFIX = 'relaunch-logs';
const GROUP = jobLogGroupName(PREFIX);
const CONTROLLER_GROUPS = { 'evaluate-policy': '/aws/lambda/relaunch-logs-evaluate', 'launch-attempt': '/aws/lambda/relaunch-logs-launch' };
const JOB = 'j-0m8x2k1qz-4fz0aa';
const SETUP_KEY = { accessKeyId: 'AKIASETUPSETUPSETUP0', secretAccessKey: 'setup' };

let moto: Moto;
let writer: CloudWatchLogsClient;
let reader: CloudWatchLogsClient;
let deniedReader: CloudWatchLogsClient;
let base = Date.now() - 60_000;

/** A user with this inline policy, and a client signed with its own keys. */
async function userClient(iam: IAMClient, name: string, actions: readonly string[]): Promise<CloudWatchLogsClient> {
  await iam.send(new CreateUserCommand({ UserName: name }));
  // moto checks the action only, against `*`: the API role's scope to the deployment's log
  // groups is checked by the IAM simulation of the stack's template (test/unit/infra).
  const policy = { Version: '2012-10-17', Statement: [{ Effect: 'Allow', Action: actions, Resource: '*' }] };
  await iam.send(new PutUserPolicyCommand({ UserName: name, PolicyName: 'logs', PolicyDocument: JSON.stringify(policy) }));
  const key = (await iam.send(new CreateAccessKeyCommand({ UserName: name }))).AccessKey;
  return new CloudWatchLogsClient({ region: REGION, endpoint: moto.endpoint, credentials: { accessKeyId: key?.AccessKeyId as string, secretAccessKey: key?.SecretAccessKey as string }, maxAttempts: 1 });
}

beforeAll(async () => {
  // Nine requests go unchecked: the three users, their policies and their keys. From then on
  // moto checks every signature and every action against the caller's policy.
  moto = await startMoto({ env: { INITIAL_NO_AUTH_ACTION_COUNT: '9' } });
  const iam = new IAMClient({ region: REGION, endpoint: moto.endpoint, credentials: SETUP_KEY });
  writer = await userClient(iam, 'shipper', ['logs:CreateLogGroup', 'logs:CreateLogStream', 'logs:PutLogEvents']);
  reader = await userClient(iam, 'api', ['logs:GetLogEvents', 'logs:FilterLogEvents', 'logs:DescribeLogStreams']);
  deniedReader = await userClient(iam, 'nobody', ['logs:DescribeLogStreams']);
  for (const group of [GROUP, ...Object.values(CONTROLLER_GROUPS)]) await writer.send(new CreateLogGroupCommand({ logGroupName: group }));
}, 120_000);

afterAll(async () => {
  await moto?.stop();
});

/** Writes lines into a stream (created on first use), a millisecond apart, as the shipper would. */
async function ship(group: string, stream: string, lines: readonly string[], create = true): Promise<void> {
  if (create) await writer.send(new CreateLogStreamCommand({ logGroupName: group, logStreamName: stream }));
  await writer.send(new PutLogEventsCommand({ logGroupName: group, logStreamName: stream, logEvents: lines.map((message) => ({ timestamp: (base += 1), message })) }));
}

/** Every page from the head until one reads '', and the position it ended at. */
async function readAll(logs: JobLogReader, stream: JobLogStream, maxBytes: number, from: string | null = null): Promise<{ pages: string[]; position: string }> {
  const pages: string[] = [];
  let position = from;
  for (;;) {
    const page = await logs.read(stream, position, maxBytes);
    position = page.position;
    if (page.text === '') return { pages, position };
    pages.push(page.text);
  }
}

const stream = (nodeRank: number, phase: 'setup' | 'run', attempt = 1): JobLogStream => ({ jobId: JOB, attempt, nodeRank, phase });

describe('CloudWatchJobLogs on moto_server', () => {
  it('reads a stream from its head, each event a line, and reads on from its position when more is shipped', async () => {
    const logs = new CloudWatchJobLogs({ client: reader, namePrefix: PREFIX, region: REGION });
    await ship(GROUP, jobLogStreamName(stream(0, 'run')), ['step 1', 'step 2', 'ünïcode ✓']);
    const first = await readAll(logs, stream(0, 'run'), 512 * 1024);
    expect(first.pages.join('')).toBe('step 1\nstep 2\nünïcode ✓\n');

    await ship(GROUP, jobLogStreamName(stream(0, 'run')), ['step 3'], false);
    const more = await readAll(logs, stream(0, 'run'), 512 * 1024, first.position);
    expect(more.pages).toEqual(['step 3\n']);
  });

  it('reads a stream not created yet as nothing, from its head, and the whole of it once its node ships', async () => {
    const logs = new CloudWatchJobLogs({ client: reader, namePrefix: PREFIX, region: REGION });
    const empty = await logs.read(stream(1, 'setup'), null, 1024);
    expect(empty.text).toBe('');
    await ship(GROUP, jobLogStreamName(stream(1, 'setup')), ['installing']);
    expect((await logs.read(stream(1, 'setup'), empty.position, 1024)).text).toBe('installing\n');
  });

  it('bounds a page by bytes without losing or repeating a line: each page as many whole events as fit, one at least', async () => {
    const logs = new CloudWatchJobLogs({ client: reader, namePrefix: PREFIX, region: REGION });
    const lines = ['a'.repeat(40_000), 'b'.repeat(40_000), 'c'.repeat(40_000), 'd'.repeat(100_000), 'e'];
    await ship(GROUP, jobLogStreamName(stream(0, 'run', 2)), lines);
    const { pages } = await readAll(logs, stream(0, 'run', 2), 90_000);
    expect(pages.join('')).toBe(lines.map((line) => `${line}\n`).join(''));
    expect(pages.map((page) => page.length)).toEqual([80_002, 40_001, 100_001, 2]);
  });

  it('refuses a position CloudWatch cannot read from as a bad cursor', async () => {
    const logs = new CloudWatchJobLogs({ client: reader, namePrefix: PREFIX, region: REGION });
    const refused = await logs.read(stream(0, 'run'), 'not-a-token', 1024).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(InvalidInputError);
    expect((refused as InvalidInputError).issues[0]?.path).toBe('cursor');
  });

  it('gives each stream its console page', () => {
    const logs = new CloudWatchJobLogs({ client: reader, namePrefix: PREFIX, region: REGION });
    expect(logs.consoleUrl(stream(0, 'run'))).toBe(
      `https://${REGION}.console.aws.amazon.com/cloudwatch/home?region=${REGION}#logsV2:log-groups/log-group/$252Frelaunch-logs$252Fjobs/log-events/${JOB}$252Fattempt-1$252Fnode-0$252Frun`,
    );
  });

  it('is refused by moto for keys whose policy does not grant the read', async () => {
    const logs = new CloudWatchJobLogs({ client: deniedReader, namePrefix: PREFIX, region: REGION });
    // moto answers its refusal in XML, which the JSON protocol's client cannot parse: the call fails either way.
    const refused = await logs.read(stream(0, 'run'), null, 1024).then(() => 'read', (error: unknown) => error);
    expect(refused).toBeInstanceOf(Error);
    expect(((refused as { $response?: { statusCode?: number } }).$response?.statusCode)).toBe(403);
  });
});

describe('CloudWatchControllerLog on moto_server', () => {
  it("finds the lines naming the job in every controller function's group, merged oldest first, and no other job's", async () => {
    const line = (message: string, jobId = JOB) => JSON.stringify({ level: 'INFO', message, jobId, attempt: 1 });
    await ship(CONTROLLER_GROUPS['launch-attempt'], 'stream-1', [line('attempt launched'), line('attempt launched', 'j-0m8x2k1qz-other0')]);
    await ship(CONTROLLER_GROUPS['evaluate-policy'], 'stream-1', [line('decision made')]);
    const controller = new CloudWatchControllerLog({ client: reader, logGroups: CONTROLLER_GROUPS });
    const { lines, complete } = await controller.linesOf(JOB, new Date(0).toISOString(), 100);
    expect(complete).toBe(true);
    expect(lines.map((entry) => [entry.source, (JSON.parse(entry.message) as { message: string }).message])).toEqual([
      ['launch-attempt', 'attempt launched'],
      ['evaluate-policy', 'decision made'],
    ]);
    expect(lines[0]!.at < lines[1]!.at).toBe(true);
  });

  it('says when there were more lines than it returns', async () => {
    const controller = new CloudWatchControllerLog({ client: reader, logGroups: CONTROLLER_GROUPS });
    const { lines, complete } = await controller.linesOf(JOB, new Date(0).toISOString(), 1);
    expect(lines).toHaveLength(1);
    expect(complete).toBe(false);
  });
});
