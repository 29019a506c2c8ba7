// The shipper's batching (agent.sh's ship_batch, awk under bash): the agent as it ships,
// its functions loaded without running main with the shipper's program as the API serves
// it, given bytes as the log holds them and read back as CloudWatch Logs would take the
// body it writes.

import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderAgentScript, AGENT_LIBRARY } from '../../../../lib/agent/script.ts';
import { taskSpec } from '../../../support/fixtures/specs.ts';

let dir: string;
let library: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'relaunch-shipper-'));
  const agent = renderAgentScript({
    apiUrl: 'http://127.0.0.1:9',
    jobId: 'job-1',
    attempt: 2,
    secretSource: { path: '/p', region: 'us-east-1', endpoint: 'http://127.0.0.1:9' },
    spec: taskSpec({ name: 'ship', run: 'true' }),
    heartbeatSeconds: 1,
    logs: { group: '/relaunch/jobs', region: 'us-east-1' },
  });
  // Everything but the call of main at the bottom, and the shipper the API serves.
  library = join(dir, 'agent-library.sh');
  writeFileSync(library, agent.slice(0, agent.lastIndexOf('main "$@"')) + AGENT_LIBRARY.program);
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Batch {
  readonly taken: number;
  readonly full: boolean;
  readonly body: { logGroupName: string; logStreamName: string; logEvents: { timestamp: number; message: string }[] };
}

/** ship_batch on `bytes` (all of them available), with its note and flush arguments. */
function batch(bytes: Buffer | string, options: { note?: string; flush?: 0 | 1 | 2 } = {}): Batch {
  const input = join(dir, 'input');
  writeFileSync(input, bytes);
  const size = Buffer.byteLength(bytes);
  const result = spawnSync(
    'bash',
    ['-c', `. "$1"; ship_batch "$2" "$3" node-stream 1700000000000 "$4" "$5" <"$6" && echo "$REPLY_SHIP_TAKEN $REPLY_SHIP_FULL"`, 'test', library, String(size), join(dir, 'body.json'), options.note ?? '', String(options.flush ?? 0), input],
    { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 },
  );
  expect(result.stderr).toBe('');
  const [taken, full] = result.stdout.trim().split(' ');
  return { taken: Number(taken), full: full === '1', body: JSON.parse(readFileSync(join(dir, 'body.json'), 'utf8')) as Batch['body'] };
}

const text = (b: Batch) => b.body.logEvents.map((event) => event.message).join('');

describe("the shipper's batches", () => {
  it('make a PutLogEvents body for the stream: one event a line, its newline kept, in order, at the time given', () => {
    const log = 'step 1\n\nstep 2 "quoted" \\ tab\t\n';
    const b = batch(log);

    expect(b).toMatchObject({ taken: Buffer.byteLength(log), full: false });
    expect(b.body.logGroupName).toBe('/relaunch/jobs');
    expect(b.body.logStreamName).toBe('node-stream');
    expect(b.body.logEvents).toEqual([
      { timestamp: 1700000000000, message: 'step 1\n' },
      { timestamp: 1700000000000, message: '\n' },
      { timestamp: 1700000000000, message: 'step 2 "quoted" \\ tab\t\n' },
    ]);
  });

  it.each([
    ['NUL', Buffer.from('a\0b\n'), 'a\uFFFDb\n'],
    ['a byte no UTF-8 sequence starts with', Buffer.from([0x61, 0xff, 0x0a]), 'a\uFFFD\n'],
    ['a sequence cut short, then ASCII', Buffer.from([0xe2, 0x82, 0x41, 0x0a]), '\uFFFDA\n'],
    ['a stray continuation byte', Buffer.from([0x80, 0x41, 0x0a]), '\uFFFDA\n'],
    ['an overlong encoding', Buffer.from([0xc0, 0xaf, 0x0a]), '\uFFFD\uFFFD\n'],
    ['a surrogate', Buffer.from([0xed, 0xa0, 0x80, 0x0a]), '\uFFFD\uFFFD\uFFFD\n'],
    ['well-formed text of every length', Buffer.from('é ✓ 𝄞\n'), 'é ✓ 𝄞\n'],
    ['control characters', Buffer.from('\x1b[1mbold\x1b[0m\r\n'), '\x1b[1mbold\x1b[0m\r\n'],
  ])('carry %s as UTF-8 JSON, bytes that are not UTF-8 replaced by U+FFFD as a decoder does', (_, bytes, expected) => {
    expect(text(batch(bytes))).toBe(expected);
    expect(expected).toBe(new TextDecoder().decode(bytes).replaceAll('\0', '\uFFFD'));
  });

  it('keep a last line without its newline for the next batch; with flush 1 they send it but for a character cut short; with 2 all of it', () => {
    const bytes = Buffer.concat([Buffer.from('whole\npart é'), Buffer.from([0xe2, 0x9c])]);
    expect(batch(bytes)).toMatchObject({ taken: 6, full: false });
    const flushed = batch(bytes, { flush: 1 });
    expect(flushed.taken).toBe(bytes.length - 2);
    expect(text(flushed)).toBe('whole\npart é');
    const ended = batch(bytes, { flush: 2 });
    expect(ended.taken).toBe(bytes.length);
    expect(text(ended)).toBe('whole\npart é\uFFFD');
  });

  it('split a line longer than an event may be, never inside a character, and put it back whole', () => {
    const ascii = `${'a'.repeat(300 * 1024)}\n`;
    const plain = batch(ascii);
    expect(text(plain)).toBe(ascii);
    expect(plain.body.logEvents.map((event) => Buffer.byteLength(event.message))).toEqual([262_118, 300 * 1024 + 1 - 262_118]);
    // With bytes that may become U+FFFD (three bytes for one), a third of that, cut before a character.
    const wide = `${'a'.repeat(87_371)}é${'b'.repeat(100_000)}\n`;
    const b = batch(wide);
    expect(b.taken).toBe(Buffer.byteLength(wide));
    expect(text(b)).toBe(wide);
    expect(b.body.logEvents.map((event) => Buffer.byteLength(event.message))).toEqual([87_371, 87_372, Buffer.byteLength(wide) - 87_371 - 87_372]);
  });

  it('put the note first, as an event of its own', () => {
    const b = batch('line\n', { note: 'relaunch: 10 bytes of this output were not shipped to CloudWatch Logs (throttled)' });
    expect(b.body.logEvents.map((event) => event.message)).toEqual(['relaunch: 10 bytes of this output were not shipped to CloudWatch Logs (throttled)\n', 'line\n']);
  });

  it('stop at 1 MiB of messages (26 bytes more an event), saying the batch is full, and pack short lines when many wait', () => {
    const lines = Array.from({ length: 150_000 }, (_, n) => `line ${n}\n`).join('');
    const b = batch(lines);

    expect(b.full).toBe(true);
    expect(text(b)).toBe(lines.slice(0, b.taken));
    const size = b.body.logEvents.reduce((sum, event) => sum + Buffer.byteLength(event.message) + 26, 0);
    expect(size).toBeLessThanOrEqual(1_048_576);
    expect(b.body.logEvents.length).toBeLessThanOrEqual(10_000);
    // Whole lines in each event.
    expect(b.body.logEvents.every((event) => event.message.endsWith('\n'))).toBe(true);
  });

  it('stop at 10,000 events', () => {
    const lines = 'x\n'.repeat(30_000);
    // Given in pieces of 2,000 lines, so none are packed: each is a round of the shipper's own.
    const b = batch(lines.slice(0, 20_000) + lines.slice(0, 20_000));
    expect(b.body.logEvents.length).toBeLessThanOrEqual(10_000);
    expect(text(b)).toBe((lines.slice(0, 20_000) + lines.slice(0, 20_000)).slice(0, b.taken));
  });
});
