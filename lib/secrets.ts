// Per-attempt callback secrets: made here, stored only as a hash, compared in constant time.

import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** A fresh secret for one attempt's agent: 32 random bytes, hex. */
export function newCallbackSecret(): string {
  return randomBytes(32).toString('hex');
}

/** SHA-256 of a secret, hex: what the attempt record keeps instead of the secret. */
export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

/**
 * Whether `secret` hashes to `hash`. Both sides are compared as 32-byte digests with
 * `timingSafeEqual`, so the time taken says nothing about how much of the secret matched.
 */
export function secretMatches(secret: string, hash: string): boolean {
  const expected = Buffer.from(hash, 'hex');
  const actual = createHash('sha256').update(secret, 'utf8').digest();
  if (expected.length !== actual.length) return false;
  return timingSafeEqual(expected, actual);
}
