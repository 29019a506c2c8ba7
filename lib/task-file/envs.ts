// `envs`: names a shell takes, values a process environment can hold, within the size limits;
// the same rules for the file's envs and for the overrides a submit adds.

import { InvalidTaskSpecError, type InputIssue } from '../errors.ts';
import { fromParser, isMapping } from '../located-yaml/fields.ts';
import { MAX_ENV_NAME_LENGTH, MAX_ENV_VALUE_BYTES, MAX_ENVS, taskTextProblem, utf8Bytes } from './limits.ts';
import { describe, expectedGot } from '../located-yaml/messages.ts';
import { formatPath } from '../located-yaml/path.ts';
import type { TaskSpec } from './types.ts';

/** A POSIX environment variable name. */
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Names a JavaScript object cannot hold as a plain key: `obj['__proto__'] = v` sets the
 * object's prototype instead, so serializers that build objects that way (the AWS SDK's,
 * for one) drop the variable or merge it into a prototype. `constructor` and `prototype`
 * are ordinary keys and are kept.
 */
const UNSAFE_NAMES: ReadonlySet<string> = new Set(['__proto__']);

/**
 * Names bash gives a meaning of its own, or will not let a script set: a variable named so
 * would change how the agent runs the job (IFS) or never reach it (UID, SHELLOPTS, ...).
 * PATH is not among them: a job's envs may set it, as SkyPilot lets them (the agent starts
 * each phase by an absolute path, and the job's own commands see the PATH it gave).
 */
const SHELL_NAMES: ReadonlySet<string> = new Set(['IFS', 'UID', 'EUID', 'PPID', 'GROUPS', 'SHELLOPTS', 'BASHOPTS', 'HOSTNAME', 'OPTIND', 'OPTARG']);

/** The prefix of the names relaunch sets in a job's environment (its ids, the node's mark). */
const RELAUNCH_PREFIX = 'RELAUNCH_';

/**
 * Why a name, valid as a variable's, belongs to relaunch or to bash and so cannot be set by
 * a task (envs or secrets), or undefined: RELAUNCH_* (the job's ids, the mark every
 * process of a local node carries), bash's own names and BASH*.
 */
export function ownedNameProblem(name: string): string | undefined {
  if (name.startsWith(RELAUNCH_PREFIX)) return `expected a name that does not start with ${RELAUNCH_PREFIX} (relaunch sets those itself), got ${name}`;
  if (SHELL_NAMES.has(name) || name.startsWith('BASH')) return `expected a name the job's shell does not use itself, got ${name}`;
  return undefined;
}

/** Why a name cannot be an env of a job, or undefined when it can. */
export function envNameProblem(name: string): string | undefined {
  return envSyntaxProblem(name) ?? ownedNameProblem(name);
}

/** Why a name cannot be a variable's at all (its form, its length), or undefined. */
function envSyntaxProblem(name: string): string | undefined {
  if (name.length > MAX_ENV_NAME_LENGTH) {
    return `expected an environment variable name of at most ${MAX_ENV_NAME_LENGTH} characters, got ${name.length} characters`;
  }
  if (!ENV_NAME.test(name)) {
    return `expected an environment variable name (letters, digits and _, not starting with a digit), got ${describe(name)}`;
  }
  if (UNSAFE_NAMES.has(name)) return `expected an environment variable name other than ${name}, which relaunch cannot store`;
  return undefined;
}

/** Why a value cannot be an env's value, or undefined when it can. */
export function envValueProblem(value: string): string | undefined {
  const bytes = utf8Bytes(value);
  if (bytes > MAX_ENV_VALUE_BYTES) return `expected a value of at most ${MAX_ENV_VALUE_BYTES} bytes (UTF-8), got ${bytes}`;
  if (value.includes('\0')) return 'expected a value without NUL characters, which no process environment can hold';
  return undefined;
}

function countProblem(count: number): string | undefined {
  return count > MAX_ENVS ? `expected at most ${MAX_ENVS} environment variables, got ${count}` : undefined;
}

/**
 * `envs`: values become the strings the job's environment holds. A number in a task file
 * arrives here as the text written (locate.ts keeps it: `1e-4`, `1.0`); one in a JSON body
 * is written as JavaScript writes it. Booleans become `True`/`False`, as SkyPilot (Python)
 * writes them, so scripts written for SkyPilot see the same text; a key with no value is ''.
 */
export const envsSchema = fromParser<Readonly<Record<string, string>>>((value, report) => {
  if (!isMapping(value)) return report(expectedGot('a mapping of environment variable names to values', value));
  const given = Object.entries(value);
  const tooMany = countProblem(given.length);
  if (tooMany !== undefined) return report(tooMany);
  const envs: [string, string][] = [];
  let failed = false;
  for (const [name, raw] of given) {
    const text = envText(raw);
    const problem = envNameProblem(name) ?? (text === undefined ? expectedGot('a string, a number, true/false or nothing', raw) : envValueProblem(text));
    if (problem !== undefined) {
      failed = true;
      report(problem, [name]);
    } else {
      envs.push([name, text as string]);
    }
  }
  return failed ? undefined : Object.fromEntries(envs);
});

/** An env's value as the environment holds it, or undefined for a value that cannot be one. */
export function envText(value: unknown): string | undefined {
  if (typeof value === 'string' || typeof value === 'number') return String(value);
  if (typeof value === 'boolean') return value ? 'True' : 'False';
  if (value === null) return '';
  return undefined;
}

/**
 * The spec with `overrides` set in its envs (they win over the file's values), checked by
 * the rules the file's own envs follow: each name and value, their count, and the task's
 * total size.
 *
 * @throws InvalidTaskSpecError naming each override that breaks a rule, or the limit the
 *   merged task exceeds.
 */
export function withEnvOverrides(spec: TaskSpec, overrides: Readonly<Record<string, string>>): TaskSpec {
  const given = Object.entries(overrides);
  const issues: InputIssue[] = [];
  for (const [name, value] of given) {
    const problem = envNameProblem(name) ?? envValueProblem(value);
    if (problem !== undefined) issues.push({ path: formatPath(['envs', name]), message: `${problem} (an override)` });
  }
  if (issues.length > 0) throw new InvalidTaskSpecError(issues);
  // Built from entries, never by assignment, so every name stays a plain own key.
  const merged: TaskSpec = { ...spec, envs: Object.fromEntries([...Object.entries(spec.envs), ...given]) };
  const tooMany = countProblem(Object.keys(merged.envs).length);
  if (tooMany !== undefined) throw new InvalidTaskSpecError([{ path: 'envs', message: `${tooMany} (overrides included)` }]);
  const tooLarge = taskTextProblem(merged);
  if (tooLarge !== undefined) throw new InvalidTaskSpecError([{ path: '', message: `${tooLarge} (overrides included)` }]);
  return merged;
}
