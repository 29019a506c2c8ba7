// Exit codes in words: 128+N is signal N, named, with a hint where one helps.

import { describe, expect, it } from 'vitest';
import { describeExitCode, signalOfExitCode } from '../../../../lib/policy/signals.ts';

describe('describeExitCode', () => {
  it.each([
    ['an ordinary code stays plain', 1, 'exit code 1'],
    ['zero stays plain', 0, 'exit code 0'],
    ['128 is no signal (signal 0 does not exist)', 128, 'exit code 128'],
    ['129 is SIGHUP', 129, 'exit code 129 (SIGHUP, hangup, the terminal or session went away)'],
    ['130 is SIGINT', 130, 'exit code 130 (SIGINT, interrupted)'],
    ['131 is SIGQUIT', 131, 'exit code 131 (SIGQUIT, quit)'],
    ['134 is SIGABRT', 134, 'exit code 134 (SIGABRT, aborted, often a failed assertion)'],
    ['137 is SIGKILL, often out of memory', 137, 'exit code 137 (SIGKILL, often out of memory)'],
    ['139 is SIGSEGV', 139, 'exit code 139 (SIGSEGV, segmentation fault)'],
    ['141 is SIGPIPE', 141, 'exit code 141 (SIGPIPE, broken pipe)'],
    ['143 is SIGTERM', 143, 'exit code 143 (SIGTERM, asked to stop)'],
    ['a named signal without a hint shows its name only', 133, 'exit code 133 (SIGTRAP)'],
    ['a real-time signal shows its number', 170, 'exit code 170 (signal 42)'],
    ['the last signal, 64, is still decoded', 192, 'exit code 192 (signal 64)'],
    ['past 128+64 there is no signal', 193, 'exit code 193'],
    ['255 stays plain', 255, 'exit code 255'],
  ])('%s', (_name, code, expected) => {
    expect(describeExitCode(code)).toBe(expected);
  });
});

describe('signalOfExitCode', () => {
  it.each([
    ['137 is signal 9', 137, { number: 9, name: 'SIGKILL' }],
    ['143 is signal 15', 143, { number: 15, name: 'SIGTERM' }],
    ['1 is no signal', 1, null],
    ['a fractional code is no signal', 137.5, null],
  ])('%s', (_name, code, expected) => {
    expect(signalOfExitCode(code)).toEqual(expected);
  });
});
