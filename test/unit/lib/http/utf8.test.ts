// decodeUtf8: UTF-8 in, text out; anything else refused at the offset of its first bad byte.

import { describe, expect, it } from 'vitest';
import { formatIssue, InvalidInputError } from '../../../../lib/errors.ts';
import { decodeUtf8, firstInvalidUtf8Byte } from '../../../../lib/http/utf8.ts';

const bytes = (...values: number[]) => Uint8Array.from(values);
const ascii = (text: string) => [...Buffer.from(text, 'latin1')];

/** The one issue decodeUtf8 refused with, formatted; fails the test if it decoded. */
function refusal(input: Uint8Array, field = 'body'): string {
  try {
    decodeUtf8(input, field);
  } catch (error) {
    if (!(error instanceof InvalidInputError)) throw error;
    expect(error.issues).toHaveLength(1);
    return formatIssue(error.issues[0] as InvalidInputError['issues'][number]);
  }
  throw new Error('expected a refusal, but the bytes decoded');
}

describe('decodeUtf8 decodes well-formed UTF-8 exactly as Node does', () => {
  it.each([
    ['nothing', bytes()],
    ['ASCII', bytes(...ascii('run: echo hi\n'))],
    ['NUL and DEL', bytes(0x00, 0x7f)],
    ['two-byte é', bytes(0xc3, 0xa9)],
    ['the last two-byte character U+07FF', bytes(0xdf, 0xbf)],
    ['three-byte 日', bytes(0xe6, 0x97, 0xa5)],
    ['U+D7FF, just below the surrogates', bytes(0xed, 0x9f, 0xbf)],
    ['U+E000, just above them', bytes(0xee, 0x80, 0x80)],
    ['four-byte 😀', bytes(0xf0, 0x9f, 0x98, 0x80)],
    ['U+10FFFF, the last code point', bytes(0xf4, 0x8f, 0xbf, 0xbf)],
    ['a byte order mark, kept', bytes(0xef, 0xbb, 0xbf, ...ascii('run: x'))],
  ])('%s', (_what, input) => {
    expect(decodeUtf8(input, 'body')).toBe(Buffer.from(input).toString('utf8'));
  });
});

describe('decodeUtf8 refuses what is not UTF-8, naming the field and the offset', () => {
  it.each([
    ['a lone continuation byte', bytes(0x61, 0x80, 0x62), 'body: invalid UTF-8 at byte 1: expected UTF-8 text, got 0x80 0x62 and the end'],
    ['0xff, never in UTF-8', bytes(0xff), 'body: invalid UTF-8 at byte 0: expected UTF-8 text, got 0xff and the end'],
    ['0xf5, past U+10FFFF as a lead', bytes(0xf5, 0x80, 0x80, 0x80), 'body: invalid UTF-8 at byte 0: expected UTF-8 text, got 0xf5 0x80 0x80 0x80 and the end'],
    ['an overlong two-byte NUL (0xc0 0x80)', bytes(0xc0, 0x80), 'body: invalid UTF-8 at byte 0: expected UTF-8 text, got 0xc0 0x80 and the end'],
    ['an overlong 0xc1', bytes(0x20, 0xc1, 0xbf), 'body: invalid UTF-8 at byte 1: expected UTF-8 text, got 0xc1 0xbf and the end'],
    ['an overlong three-byte form', bytes(0xe0, 0x80, 0xaf), 'body: invalid UTF-8 at byte 0: expected UTF-8 text, got 0xe0 0x80 0xaf and the end'],
    ['an overlong four-byte form', bytes(0xf0, 0x8f, 0xbf, 0xbf), 'body: invalid UTF-8 at byte 0: expected UTF-8 text, got 0xf0 0x8f 0xbf 0xbf and the end'],
    ['a surrogate (CESU-8)', bytes(0xed, 0xa0, 0x80), 'body: invalid UTF-8 at byte 0: expected UTF-8 text, got 0xed 0xa0 0x80 and the end'],
    ['a code point past U+10FFFF', bytes(0xf4, 0x90, 0x80, 0x80), 'body: invalid UTF-8 at byte 0: expected UTF-8 text, got 0xf4 0x90 0x80 0x80 and the end'],
    ['a sequence cut short by the end', bytes(0x61, 0xe2, 0x82), 'body: invalid UTF-8 at byte 1: expected UTF-8 text, got 0xe2 0x82 and the end'],
    ['a sequence cut short by ASCII', bytes(0xe2, 0x82, 0x41, 0x42, 0x43), 'body: invalid UTF-8 at byte 0: expected UTF-8 text, got 0xe2 0x82 0x41 0x42'],
    ['a four-byte sequence whose third byte is wrong', bytes(0xf0, 0x9f, 0x41, 0x80), 'body: invalid UTF-8 at byte 0: expected UTF-8 text, got 0xf0 0x9f 0x41 0x80 and the end'],
    ['Latin-1 text after 1234 good bytes', bytes(...ascii('x'.repeat(1234)), 0xe9, ...ascii('t\u00e9')), 'body: invalid UTF-8 at byte 1234: expected UTF-8 text, got 0xe9 0x74 0xe9 and the end'],
  ])('%s', (_what, input, issue) => {
    expect(refusal(input)).toBe(issue);
  });

  it('names the field it was given', () => {
    expect(refusal(bytes(0xff), 'task.yaml')).toMatch(/^task\.yaml: invalid UTF-8 at byte 0/);
  });
});

describe('firstInvalidUtf8Byte agrees with the WHATWG decoder', () => {
  /** A small fixed-seed generator, so a failure reproduces. */
  function random(seed: number): () => number {
    let state = seed;
    return () => {
      state = (Math.imul(state, 1_103_515_245) + 12_345) >>> 0;
      return state >>> 16;
    };
  }

  it('on 20,000 short byte strings biased towards multi-byte leads and continuations', () => {
    const next = random(42);
    const interesting = [0x00, 0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xe1, 0xec, 0xed, 0xee, 0xef, 0xf0, 0xf1, 0xf3, 0xf4, 0xf5, 0xff];
    const strict = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
    const lenient = new TextDecoder('utf-8', { ignoreBOM: true });
    for (let n = 0; n < 20_000; n += 1) {
      const input = Uint8Array.from({ length: next() % 7 }, () => interesting[next() % interesting.length] as number);
      let valid = true;
      try {
        strict.decode(input);
      } catch {
        valid = false;
      }
      const offset = firstInvalidUtf8Byte(input);
      const hex = Buffer.from(input).toString('hex');
      expect(offset === -1, hex).toBe(valid);
      if (offset === -1) continue;
      // The first bad byte: everything before it decodes, and the decoder replaces what starts there.
      expect(() => strict.decode(input.subarray(0, offset)), hex).not.toThrow();
      expect(lenient.decode(input.subarray(offset)).startsWith('\uFFFD'), hex).toBe(true);
    }
  });
});
