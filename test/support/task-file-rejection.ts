// What a parse that should reject a task threw, for the spec tests; a parse that accepts fails the test.

import { formatIssue, InvalidTaskSpecError } from '../../lib/errors.ts';

/** The InvalidTaskSpecError `parse` throws; anything else thrown is rethrown. */
export function rejectionOf(parse: () => unknown): InvalidTaskSpecError {
  try {
    parse();
  } catch (error) {
    if (error instanceof InvalidTaskSpecError) return error;
    throw error;
  }
  throw new Error('expected the task to be rejected, but it was accepted');
}

/** The issues `parse`'s rejection carries, formatted. */
export function rejectedIssues(parse: () => unknown): string[] {
  return rejectionOf(parse).issues.map(formatIssue);
}
