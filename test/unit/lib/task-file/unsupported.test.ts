// Wording of keys a section does not take: unsupported, misplaced, misspelt, unknown.

import { describe, expect, it } from 'vitest';
import { editDistance, unknownKeyMessage, type Section } from '../../../../lib/task-file/unsupported.ts';

describe('editDistance', () => {
  it.each([
    ['kitten', 'sitting', 3],
    ['recovery_on_exit_codes', 'recover_on_exit_codes', 1],
    ['regoin', 'region', 1],
    ['', 'abc', 3],
    ['abc', '', 3],
    ['same', 'same', 0],
  ])('from %j to %j is %i', (a, b, distance) => {
    expect(editDistance(a, b)).toBe(distance);
  });
});

describe('unknownKeyMessage', () => {
  const supported: Record<Section, readonly string[]> = {
    task: ['abcd', 'abce', 'run'],
    resources: ['cpus', 'disk_size'],
    job_recovery: [],
    restart_backoff: [],
    candidate: ['cpus'],
  };

  it.each([
    ['a SkyPilot key relaunch does not support', 'task', 'service', 'not supported by relaunch yet (a SkyPilot key)'],
    ['a relaunch key in a section without it is only unknown', 'restart_backoff', 'boot_timeout', 'unknown key'],
    ['a key of another section', 'task', 'cpus', 'unknown key here, did you mean `resources.cpus`?'],
    [
      'a resources key inside any_of or ordered, set once outside the list',
      'candidate',
      'disk_size',
      'not taken inside any_of or ordered: relaunch varies only cpus between candidates; set disk_size once, outside the list',
    ],
    ['the first of equally close keys', 'task', 'abcf', 'unknown key, did you mean `abcd`?'],
    ['a key differing only in case and dashes', 'resources', 'CPUS', 'unknown key, did you mean `cpus`?'],
    ['a short key too far from any', 'task', 'xy', 'unknown key'],
  ])('%s', (_name, section, key, message) => {
    expect(unknownKeyMessage(section as Section, key, supported)).toBe(message);
  });
});
