// The Idempotency-Key request header (IETF draft-ietf-httpapi-idempotency-key-header): what
// a key may be, checked before it goes near a use case or a table.

import { InvalidInputError } from '../errors.ts';

/** The header, as the draft names it (read in any case). */
export const IDEMPOTENCY_KEY_HEADER = 'Idempotency-Key';

/** The response header that says a submit was answered from an earlier one with the same key. */
export const IDEMPOTENT_REPLAY_HEADER = 'idempotent-replayed';

/** The longest key accepted: a UUID is 36 characters; a client's own scheme gets room, not megabytes. */
export const MAX_IDEMPOTENCY_KEY_LENGTH = 255;

/** Visible ASCII: no space, no control character, nothing a log or a terminal could misread. */
const VISIBLE = /^[\x21-\x7e]*$/;

/**
 * The key a header value carries; undefined when the header is absent. The key is written
 * as is (`Idempotency-Key: 8e03978e-40d5-43e8-bc93-6894a57f9324`) or as a structured-field
 * string, in double quotes, as the draft shows it; either way 1-255 visible ASCII
 * characters, with no quote or backslash inside the quotes. Anything else is
 * InvalidInputError at the header's name, saying what was wrong without repeating the
 * value (it may be huge, or hold escape sequences).
 */
export function idempotencyKeyOf(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const quoted = value.length >= 2 && value.startsWith('"') && value.endsWith('"');
  const key = quoted ? value.slice(1, -1) : value;
  const refuse = (got: string) =>
    new InvalidInputError([
      { path: IDEMPOTENCY_KEY_HEADER, message: `expected 1-${MAX_IDEMPOTENCY_KEY_LENGTH} visible ASCII characters (a UUID, say), got ${got}` },
    ]);
  if (key.length === 0) throw refuse('an empty key');
  if (key.length > MAX_IDEMPOTENCY_KEY_LENGTH) throw refuse(`${key.length} characters`);
  if (!VISIBLE.test(key)) {
    const at = [...key].findIndex((char) => !VISIBLE.test(char));
    const code = key.codePointAt(at) ?? 0;
    const what = code < 0x20 || code === 0x7f ? 'a control character' : code === 0x20 ? 'a space' : 'a non-ASCII character';
    throw refuse(`${what} (U+${code.toString(16).toUpperCase().padStart(4, '0')}) at position ${at + 1}`);
  }
  if (quoted && /["\\]/.test(key)) throw refuse('a quote or backslash inside the quotes');
  return key;
}
