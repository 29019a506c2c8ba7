// Every handler's input goes through its contract schema first: a malformed event fails
// with InvalidInputError (its name is what Step Functions' catch-all records), never deeper.

import type { z } from 'zod';
import { InvalidInputError } from '../../lib/errors.ts';

/** The event, checked against `schema`; every problem is an issue with its dotted path. */
export function parseEvent<T>(schema: z.ZodType<T>, event: unknown, what: string): T {
  const parsed = schema.safeParse(event);
  if (parsed.success) return parsed.data;
  throw new InvalidInputError(
    parsed.error.issues.map((issue) => ({
      path: [what, ...issue.path.map(String)].join('.'),
      message: issue.message,
    })),
  );
}
