// DATA_CONFIG as the API reads it, and LAUNCH_PACE as LaunchAttempt reads it: absent on a
// stack from before them, else checked field by field.

import { describe, expect, it } from 'vitest';
import { ConfigurationError } from '../../../../lib/errors.ts';
import { EC2_LAUNCH_PACE } from '../../../../lib/launch-pace.ts';
import { parseDataConfig, parseLaunchPace } from '../../../../lib/workflow/env.ts';

describe('parseDataConfig', () => {
  it('reads the bucket and the allowed buckets', () => {
    expect(parseDataConfig({ DATA_CONFIG: '{"bucket":"b-1","allowedBuckets":["team-*"]}' })).toEqual({ bucket: 'b-1', allowedBuckets: ['team-*'] });
  });

  it('is undefined when the stack sets none', () => {
    expect(parseDataConfig({})).toBeUndefined();
    expect(parseDataConfig({ DATA_CONFIG: '' })).toBeUndefined();
  });

  it.each([
    ['not JSON', '{bucket', /DATA_CONFIG: expected JSON/],
    ['a missing bucket', '{"allowedBuckets":[]}', /DATA_CONFIG\.bucket/],
    ['an extra field', '{"bucket":"b","allowedBuckets":[],"x":1}', /DATA_CONFIG/],
  ])('names the variable for %s', (_name, value, message) => {
    expect(() => parseDataConfig({ DATA_CONFIG: value })).toThrow(ConfigurationError);
    expect(() => parseDataConfig({ DATA_CONFIG: value })).toThrow(message);
  });
});

describe('parseLaunchPace', () => {
  it("reads the bucket, and is EC2's default bucket when the stack sets none", () => {
    expect(parseLaunchPace({ LAUNCH_PACE: '{"burst":200,"perSecond":0.5}' })).toEqual({ burst: 200, perSecond: 0.5 });
    expect(parseLaunchPace({})).toEqual(EC2_LAUNCH_PACE);
    expect(parseLaunchPace({ LAUNCH_PACE: '' })).toEqual(EC2_LAUNCH_PACE);
  });

  it.each([
    ['not JSON', '1000/2', /LAUNCH_PACE: expected JSON/],
    ['a burst of 0', '{"burst":0,"perSecond":2}', /LAUNCH_PACE\.burst/],
    ['a negative rate', '{"burst":10,"perSecond":-1}', /LAUNCH_PACE\.perSecond/],
    ['a fractional burst', '{"burst":1.5,"perSecond":2}', /LAUNCH_PACE\.burst/],
    ['an extra field', '{"burst":10,"perSecond":2,"x":1}', /LAUNCH_PACE/],
  ])('names the variable for %s', (_name, value, message) => {
    expect(() => parseLaunchPace({ LAUNCH_PACE: value })).toThrow(ConfigurationError);
    expect(() => parseLaunchPace({ LAUNCH_PACE: value })).toThrow(message);
  });
});
