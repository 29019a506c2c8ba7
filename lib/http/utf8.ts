// Bytes to text, strictly: input that is not UTF-8 is refused with where it goes wrong,
// never turned silently into U+FFFD replacement characters.

import { InvalidInputError } from '../errors.ts';

/** Bytes a refusal shows from the offending sequence on. */
const SHOWN_BYTES = 4;

/**
 * The offset of the first byte of the first ill-formed sequence, or -1 when every byte is
 * well-formed UTF-8 (Unicode's Table 3-7: no overlong forms, no surrogates, nothing above
 * U+10FFFF, no sequence cut short). The byte ranges below are that table, row by row.
 */
export function firstInvalidUtf8Byte(bytes: Uint8Array): number {
  let i = 0;
  while (i < bytes.length) {
    const lead = bytes[i] as number;
    if (lead < 0x80) {
      i += 1;
      continue;
    }
    const rule = SEQUENCES.find(([first, last]) => lead >= first && lead <= last);
    if (rule === undefined) return i;
    const [, , secondLow, secondHigh, length] = rule;
    for (let k = 1; k < length; k += 1) {
      const byte = bytes[i + k];
      const [low, high] = k === 1 ? [secondLow, secondHigh] : [0x80, 0xbf];
      if (byte === undefined || byte < low || byte > high) return i;
    }
    i += length;
  }
  return -1;
}

/** [lead low, lead high, second byte low, second byte high, sequence length]. */
const SEQUENCES: readonly (readonly [number, number, number, number, number])[] = [
  [0xc2, 0xdf, 0x80, 0xbf, 2],
  [0xe0, 0xe0, 0xa0, 0xbf, 3],
  [0xe1, 0xec, 0x80, 0xbf, 3],
  [0xed, 0xed, 0x80, 0x9f, 3],
  [0xee, 0xef, 0x80, 0xbf, 3],
  [0xf0, 0xf0, 0x90, 0xbf, 4],
  [0xf1, 0xf3, 0x80, 0xbf, 4],
  [0xf4, 0xf4, 0x80, 0x8f, 4],
];

/**
 * Decodes UTF-8 bytes into text. A byte order mark is kept as U+FEFF, as Node's
 * `buffer.toString('utf8')` keeps it, so valid input reads exactly as it did before.
 *
 * @param field what the bytes are (`body`, a file's path), named in the error.
 * @throws InvalidInputError at `field` when the bytes are not UTF-8:
 *   `body: invalid UTF-8 at byte 1234: expected UTF-8 text, got 0xff 0x41` (the offset is
 *   0-based, as `xxd` and `od -A d` count).
 */
export function decodeUtf8(bytes: Uint8Array, field: string): string {
  const offset = firstInvalidUtf8Byte(bytes);
  if (offset >= 0) {
    const shown = [...bytes.subarray(offset, offset + SHOWN_BYTES)].map((byte) => `0x${byte.toString(16).padStart(2, '0')}`);
    const end = offset + SHOWN_BYTES >= bytes.length ? ' and the end' : '';
    throw new InvalidInputError([
      { path: field, message: `invalid UTF-8 at byte ${offset}: expected UTF-8 text, got ${shown.join(' ')}${end}` },
    ]);
  }
  return new TextDecoder('utf-8', { ignoreBOM: true }).decode(bytes);
}
