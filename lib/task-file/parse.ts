// The task file's front door: YAML text or a JSON body in, a normalized TaskSpec (or every problem) out.

import { InvalidTaskSpecError, type InputIssue } from '../errors.ts';
import type { ParsedTask, SpecWarning } from './types.ts';
import { NO_LINES, type LineTable, type LocatedValue } from '../located-yaml/locate.ts';
import { expectedGot, type Problem } from '../located-yaml/messages.ts';
import { formatPath, taskPath } from '../located-yaml/path.ts';
import { isMapping } from '../located-yaml/fields.ts';
import { crossFieldProblems, problemsOfIssue, taskSchema } from './schema.ts';
import { specWarnings, type WarningOptions } from './warnings.ts';
import { readTaskYaml, readYamlDocuments } from './yaml-file.ts';
import { taskTextBytes } from './limits.ts';

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

/** A file's job: one task, or a pipeline of tasks run in order. */
export interface ParsedJob {
  /** Set for a pipeline (several documents): its header's name, if it has a header. */
  readonly pipeline: { readonly name: string | null } | null;
  /** At least one. */
  readonly tasks: readonly ParsedTask[];
  /** Every task's warnings; a pipeline's carry `task N: ` in their paths. */
  readonly warnings: readonly SpecWarning[];
}

/** The most tasks a pipeline may have. */
export const MAX_PIPELINE_TASKS = 16;

/**
 * The most bytes (UTF-8) every task's envs, setup and run may take together in a pipeline:
 * the job's record holds them all beside the running task's, within DynamoDB's 400 KB.
 */
export const MAX_PIPELINE_TEXT_BYTES = 160 * 1024;

/** Keys of a pipeline's (or a job group's) header document. */
const HEADER_KEYS: ReadonlySet<string> = new Set(['name', 'execution', 'primary_tasks']);

/** Whether the first of `count` documents, `value`, is a pipeline's header rather than a task. */
export function isPipelineHeader(value: unknown, count: number): value is Record<string, unknown> {
  return count > 1 && isMapping(value) && Object.keys(value).every((key) => HEADER_KEYS.has(key));
}

/**
 * Parses a task file that may be a SkyPilot pipeline: several YAML documents, an optional
 * first one with only `name` (and `execution: serial`), then the tasks, run in order.
 * `execution: parallel` (a job group) is refused. A task's problems carry `task N: ` in
 * their paths, and every task's problems are reported at once.
 *
 * @throws InvalidTaskSpecError as parseTaskFile does, for every task.
 */
export function parseJobFile(text: string, options: WarningOptions = {}): ParsedJob {
  const { documents, lines } = readYamlDocuments(text);
  if (documents.length === 1) {
    const [only] = documents as [LocatedValue];
    const task = validate(only.value, only.lines, only.problems, options);
    return { pipeline: null, tasks: [task], warnings: task.warnings };
  }
  const [first] = documents as [LocatedValue];
  const header = isPipelineHeader(first.value, documents.length) ? first.value : null;
  const taskDocuments = header === null ? documents : documents.slice(1);
  const issues: InputIssue[] = [];
  let name: string | null = null;
  if (header !== null) {
    if (header.execution !== undefined && header.execution !== null && header.execution !== 'serial') {
      const message = `expected serial or nothing (relaunch runs a pipeline's tasks in order), got ${JSON.stringify(header.execution)}: job groups (execution: parallel) are not supported`;
      issues.push({ path: 'execution', message, line: first.lines.lineOf(['execution']) ?? lines[0] ?? 1 });
    }
    if (header.primary_tasks !== undefined) {
      const message = "not supported by relaunch: it names a job group's primary tasks, and relaunch runs a pipeline's tasks in order";
      issues.push({ path: 'primary_tasks', message, line: first.lines.lineOf(['primary_tasks']) ?? lines[0] ?? 1 });
    }
    try {
      name = validate({ name: header.name }, first.lines, [], {}).spec.name;
    } catch (error) {
      if (!(error instanceof InvalidTaskSpecError)) throw error;
      issues.push(...error.issues);
    }
  }
  if (taskDocuments.length > MAX_PIPELINE_TASKS) {
    issues.push({ path: '', message: `expected a pipeline of at most ${MAX_PIPELINE_TASKS} tasks, got ${taskDocuments.length}` });
  }
  const tasks: ParsedTask[] = [];
  taskDocuments.forEach((document, index) => {
    try {
      tasks.push(validate(document.value, document.lines, document.problems, options));
    } catch (error) {
      if (!(error instanceof InvalidTaskSpecError)) throw error;
      issues.push(...error.issues.map((issue) => ({ ...issue, path: taskPath(index, issue.path) })));
    }
  });
  const bytes = tasks.reduce((sum, task) => sum + taskTextBytes(task.spec), 0);
  if (bytes > MAX_PIPELINE_TEXT_BYTES) {
    issues.push({ path: '', message: `expected the tasks' envs, setup and run to take at most ${MAX_PIPELINE_TEXT_BYTES} bytes together (160 KiB), got ${bytes}` });
  }
  if (issues.length > 0) throw new InvalidTaskSpecError(issues.sort((a, b) => (a.line ?? 0) - (b.line ?? 0)));
  const warnings = tasks.flatMap((task, index) => task.warnings.map((warning) => ({ ...warning, path: taskPath(index, warning.path) })));
  return { pipeline: { name }, tasks, warnings };
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
