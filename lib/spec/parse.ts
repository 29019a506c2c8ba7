// The task file's front door: YAML text or a JSON body in, a normalized TaskSpec (or every problem) out.

import { InvalidTaskSpecError, type InputIssue } from '../errors.ts';
import type { ParsedTask, SpecWarning } from './types.ts';
import { NO_LINES, type LineTable } from './locate.ts';
import { expectedGot, type Problem } from './messages.ts';
import { formatPath } from './path.ts';
import { isMapping } from './fields.ts';
import { crossFieldProblems, problemsOfIssue, taskSchema } from './schema.ts';
import { specWarnings, type WarningOptions } from './warnings.ts';
import { readTaskYaml } from './yaml-file.ts';

/** Problems as the user sees them: a dotted path, a line when known, in the file's order. */
function placed(problems: readonly Problem[], lines: LineTable): InputIssue[] {
  const issues = problems.map((problem): InputIssue => {
    const line = lines.lineOf(problem.path);
    const path = formatPath(problem.path);
    return line === undefined ? { path, message: problem.message } : { path, message: problem.message, line };
  });
  return issues.sort((a, b) => (a.line ?? 0) - (b.line ?? 0));
}

/**
 * Validates plain task data. `readProblems` are what reading the file found (template
 * placeholders); a field they cover is not reported a second time by the schema.
 */
function validate(task: unknown, lines: LineTable, readProblems: readonly Problem[], options: WarningOptions): ParsedTask {
  if (!isMapping(task)) {
    const message = expectedGot('a task (a mapping with run, resources, ...)', task);
    throw new InvalidTaskSpecError(placed([{ path: [], message }], lines));
  }
  const result = taskSchema.safeParse(task);
  const covered = new Set(readProblems.map((problem) => formatPath(problem.path)));
  const found = [...(result.error?.issues.flatMap(problemsOfIssue) ?? []), ...crossFieldProblems(task)];
  const problems = [...readProblems, ...found.filter((problem) => !covered.has(formatPath(problem.path)))];
  if (!result.success || problems.length > 0) throw new InvalidTaskSpecError(placed(problems, lines));
  const { spec, secrets } = result.data;
  const warnings: SpecWarning[] = placed(specWarnings(task, spec, options), lines);
  return { spec, warnings, secrets };
}

/**
 * Parses a task file (SkyPilot's task YAML) into a normalized TaskSpec and its warnings
 * (with `review`, also those only `relaunch validate` gives).
 *
 * @throws InvalidTaskSpecError carrying every problem of the file at once, each with its
 *   path and line: YAML syntax errors, a pipeline (several documents), unsupported or
 *   unknown keys, and invalid values.
 */
export function parseTaskFile(text: string, options: WarningOptions = {}): ParsedTask {
  const { value, lines, problems } = readTaskYaml(text);
  return validate(value, lines, problems, options);
}

/**
 * Parses a task given as data (a JSON body of the API), with the same rules as
 * parseTaskFile but no line numbers.
 *
 * @throws InvalidTaskSpecError carrying every problem at once.
 */
export function parseTaskObject(value: unknown, options: WarningOptions = {}): ParsedTask {
  return validate(value, NO_LINES, [], options);
}
