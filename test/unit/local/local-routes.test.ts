// The local API's routes for this machine's commands: a chaos plan survives the wire as a
// chaos file, a submit body is checked field by field, and a web page may call neither route.

import { describe, expect, it } from 'vitest';
import { parseChaosFile } from '../../../lib/chaos-file/parse.ts';
import type { ChaosPlan } from '../../../lib/chaos-file/types.ts';
import { InvalidInputError } from '../../../lib/errors.ts';
import { answerLocalRoute, chaosFileText, parseSubmitBody } from '../../../local/local-routes.ts';
import { preemptAttemptsPlan } from '../../../local/chaos.ts';

/** A plan without where its faults were written, as a plan read back from the wire compares. */
function bare(plan: ChaosPlan): unknown {
  return plan.faults.map((fault) => Object.fromEntries(Object.entries(fault).filter(([key]) => key !== 'source')));
}

describe('chaosFileText', () => {
  it.each([
    ['--preempt-attempts 1,3', preemptAttemptsPlan([1, 3])],
    [
      'every kind of fault',
      {
        faults: [
          { kind: 'preempt', attempt: 1, node: 1, afterMs: 2000, warningMs: 120_000 },
          { kind: 'rebalance', attempt: 2, node: 0, afterMs: 0 },
          { kind: 'lose', attempt: 2, node: 0, afterMs: 1500 },
          { kind: 'silence', attempt: 3, node: 0, afterMs: 0, from: 'boot', forMs: 5000 },
          { kind: 'silence', attempt: 4, node: 0, afterMs: 10 },
          { kind: 'no_capacity', attempt: 5, tries: 2 },
          { kind: 'drop_events', attempt: 6 },
        ],
      } satisfies ChaosPlan,
    ],
  ])('%s: parsed back, the same plan', (_what, plan) => {
    expect(bare(parseChaosFile(chaosFileText(plan)))).toEqual(bare(plan));
  });

  it('carries the boot, alone or beside faults', () => {
    expect(parseChaosFile(chaosFileText({ faults: [], bootMs: 20_000 }))).toEqual({ faults: [], bootMs: 20_000 });
    const plan: ChaosPlan = { faults: [{ kind: 'drop_events', attempt: 1 }], bootMs: 1_500 };
    const back = parseChaosFile(chaosFileText(plan));
    expect(bare(back)).toEqual(bare(plan));
    expect(back.bootMs).toBe(1_500);
  });
});

describe('parseSubmitBody', () => {
  it('takes a task with overrides and a chaos file', () => {
    const body = { task: 'run: echo hi\n', envOverrides: { A: '1' }, secretOverrides: {}, chaos: null };
    expect(parseSubmitBody(JSON.stringify(body))).toEqual(body);
  });

  it.each([
    ['not JSON', '{', [{ path: 'body', message: 'expected a JSON object' }]],
    ['a list', '[]', [{ path: 'body', message: 'expected a JSON object' }]],
    [
      'every field wrong',
      JSON.stringify({ task: 1, envOverrides: { A: 2 }, secretOverrides: [], chaos: 3, extra: true }),
      [
        { path: 'extra', message: 'unknown field; expected task, envOverrides, secretOverrides or chaos' },
        { path: 'task', message: 'expected the task file as text' },
        { path: 'envOverrides', message: 'expected a map of names to text values' },
        { path: 'secretOverrides', message: 'expected a map of names to text values' },
        { path: 'chaos', message: 'expected a chaos file as text, or null' },
      ],
    ],
  ])('refuses %s, naming each field', (_what, text, issues) => {
    let thrown: unknown;
    try {
      parseSubmitBody(text);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(InvalidInputError);
    expect((thrown as InvalidInputError).issues).toEqual(issues);
  });
});

describe('answerLocalRoute', () => {
  const store = { listEvents: () => Promise.resolve([]), getJob: () => Promise.reject(new Error('not asked')) };

  it.each([
    ['an Origin', { origin: 'http://127.0.0.1:8080' }],
    ['Sec-Fetch-Site', { 'sec-fetch-site': 'same-origin' }],
  ])('refuses a request with %s (a web page) on both routes', async (_what, headers) => {
    for (const [method, path] of [['POST', '/_local/submit'], ['GET', '/_local/events/j-0m8x2k1qz-4fz0aa']]) {
      const answer = await answerLocalRoute({ method: method as string, path: path as string, headers, body: '' }, { store });
      expect(answer?.statusCode).toBe(403);
    }
  });

  it('leaves every other path to the REST API', async () => {
    expect(await answerLocalRoute({ method: 'GET', path: '/jobs', headers: {}, body: '' }, { store })).toBeNull();
  });

  it('a submit that is not JSON is 415; a runtime without a submitter answers 404', async () => {
    const submit = () => Promise.reject(new Error('not asked'));
    const yaml = await answerLocalRoute({ method: 'POST', path: '/_local/submit', headers: { 'content-type': 'application/yaml' }, body: 'run: x' }, { store, submit });
    expect(yaml?.statusCode).toBe(415);
    const none = await answerLocalRoute({ method: 'POST', path: '/_local/submit', headers: { 'content-type': 'application/json' }, body: '{}' }, { store });
    expect(none?.statusCode).toBe(404);
  });
});
