// Every handler's input goes through its contract schema first: a malformed event fails
// with InvalidInputError (its name is what Step Functions' catch-all records), never deeper.

import type * as z from '../../lib/zod.ts';
import { InvalidInputError } from '../../lib/errors.ts';
import { issuesFromZod } from '../../lib/zod-issues.ts';

/** The event, checked against `schema`; every problem is an issue with its path under `what`. */
export function parseEvent<T>(schema: z.ZodMiniType<T>, event: unknown, what: string): T {
  const parsed = schema.safeParse(event);
  if (parsed.success) return parsed.data;
  throw new InvalidInputError(issuesFromZod(parsed.error, what));
}
