import { describe, expect, it } from 'vitest';
import {
  jobLogGroupName,
  jobLogStreamConsoleUrl,
  jobLogStreamName,
  nodeLogStreamPrefix,
  parseJobLogStreamName,
} from '../../../lib/job-log-names.ts';

const stream = { jobId: 'j-0m8x2k1qz-4fz0aa', attempt: 3, nodeRank: 1, phase: 'run' } as const;

describe('job log names', () => {
  it('names a group per deployment and a stream per job, attempt, node and phase', () => {
    expect(jobLogGroupName('prod')).toBe('/prod/jobs');
    expect(jobLogStreamName(stream)).toBe('j-0m8x2k1qz-4fz0aa/attempt-3/node-1/run');
    expect(jobLogStreamName(stream).startsWith(nodeLogStreamPrefix(stream))).toBe(true);
  });

  it('reads back the names it writes, and nothing else', () => {
    expect(parseJobLogStreamName(jobLogStreamName(stream))).toEqual(stream);
    for (const name of ['j-1/attempt-0/node-0/run', 'j-1/attempt-1/node-01/run', 'j-1/attempt-1/node-0/build', 'j:1/attempt-1/node-0/run', '']) {
      expect(parseJobLogStreamName(name)).toBeUndefined();
    }
  });

  it('links the console page of a stream, with its names escaped as the console escapes them', () => {
    expect(jobLogStreamConsoleUrl({ region: 'eu-west-1', namePrefix: 'prod', stream })).toBe(
      'https://eu-west-1.console.aws.amazon.com/cloudwatch/home?region=eu-west-1#logsV2:log-groups/log-group/' +
        '$252Fprod$252Fjobs/log-events/j-0m8x2k1qz-4fz0aa$252Fattempt-3$252Fnode-1$252Frun',
    );
  });
});
