// Paths into a task file, and how they read in messages: `resources.accelerators[1]`.

/** One step into a task: a mapping key or a list index. */
export type PathSegment = string | number;

/** Where a value sits in the task, from the top: `['resources', 'cpus']`. */
export type Path = readonly PathSegment[];

/** A key that reads unambiguously after a dot; anything else is shown quoted in brackets. */
const PLAIN_KEY = /^[A-Za-z_][A-Za-z0-9_-]*$/;

/**
 * Renders a path the way every message shows it: keys joined by dots, list indexes in
 * brackets, and keys that would not read as one word (`A100:1`, `/data`) quoted in brackets:
 * `resources.job_recovery.recover_on_exit_codes[1]`, `resources.accelerators["A100:1"]`.
 */
export function formatPath(path: Path): string {
  let text = '';
  for (const segment of path) {
    if (typeof segment === 'number') text += `[${segment}]`;
    else if (!PLAIN_KEY.test(segment)) text += `[${JSON.stringify(segment)}]`;
    else text += text === '' ? segment : `.${segment}`;
  }
  return text;
}

/**
 * `task N: ` before a task's own path: where a pipeline's task (`index` from 0) reports a
 * problem. Tasks are counted from 1 wherever a person reads one (`logs --task 2`, status's
 * TASK column, "task 2 of 3"), so the first document's problems are `task 1: run: ...`.
 */
export function taskPath(index: number, path: string): string {
  return path === '' ? `task ${index + 1}` : `task ${index + 1}: ${path}`;
}
