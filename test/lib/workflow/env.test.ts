// DATA_CONFIG as the API reads it: absent on a stack from before it, else checked field by field.

import { describe, expect, it } from 'vitest';
import { ConfigurationError } from '../../../lib/errors.ts';
import { parseDataConfig } from '../../../lib/workflow/env.ts';

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
