// zod's issues as InputIssues: one path format everywhere (the task parser's `a.b[0].c`),
// whether the input was an API body, a Lambda event or CDK context.

import type * as z from './zod.ts';
import type { InputIssue } from './errors.ts';
import { formatPath } from './located-yaml/path.ts';

/**
 * A zod issue's path as every message shows it, `a.b[0].c` (lib/located-yaml/path.ts's formatPath), after
 * `prefix` when one is given: `issuePath(['x', 0], 'state')` is `state.x[0]`. The prefix is
 * taken as written (a CDK context key such as `relaunch:subnets` is not quoted).
 */
export function issuePath(path: readonly PropertyKey[], prefix = ''): string {
  const rest = formatPath(path.map((segment) => (typeof segment === 'number' ? segment : String(segment))));
  if (prefix === '' || rest === '') return prefix + rest;
  return rest.startsWith('[') ? `${prefix}${rest}` : `${prefix}.${rest}`;
}

/** Every issue of a failed parse, each with its path (under `prefix`) and zod's message. */
export function issuesFromZod(error: z.core.$ZodError, prefix = ''): InputIssue[] {
  return error.issues.map((issue) => ({ path: issuePath(issue.path, prefix), message: issue.message }));
}
