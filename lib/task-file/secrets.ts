// `secrets`: like envs, they reach the job's environment, but their values never sit in
// the job's record, its spec, the API's answers, logs or user data. The file names them,
// with a value or with null (given at submit: `--secret NAME` or `--secret NAME=VALUE`).

import { InvalidTaskSpecError, type InputIssue } from '../errors.ts';
import { envNameProblem, envText, envValueProblem, withEnvOverrides } from './envs.ts';
import { fromParser, isMapping } from '../located-yaml/fields.ts';
import { utf8Bytes } from './limits.ts';
import { expectedGot, type Problem } from '../located-yaml/messages.ts';
import { formatPath, taskPath } from '../located-yaml/path.ts';
import type { ParsedJob } from './parse.ts';
import type { TaskSpec } from './types.ts';

/** The most secrets a task may have. */
export const MAX_SECRETS = 64;

/**
 * The most bytes (UTF-8) every secret's name and value may take together. On EC2 they
 * travel base64-encoded in one SSM SecureString per node beside the callback secret, and
 * an advanced parameter holds 8 KB: 4 KiB of names and values encode to under 5.5 KB.
 */
export const MAX_SECRETS_BYTES = 4096;

/**
 * Why a name cannot be a secret's, or undefined when it can: envs' rules (relaunch's and
 * bash's own names refused), and not PATH either, which a secret's hidden value would make
 * a puzzle of.
 */
export function secretNameProblem(name: string): string | undefined {
  const problem = envNameProblem(name);
  if (problem !== undefined) return problem;
  if (name === 'PATH') return `expected a name the job's shell does not use itself, got ${name}`;
  return undefined;
}

/** A secret's value as given in the file: text, or null when it must be given at submit. */
export type SecretValues = Readonly<Record<string, string | null>>;

/** Why these secrets cannot be stored together, or undefined. */
function totalProblem(values: Readonly<Record<string, string | null>>): string | undefined {
  const entries = Object.entries(values);
  if (entries.length > MAX_SECRETS) return `expected at most ${MAX_SECRETS} secrets, got ${entries.length}`;
  const bytes = entries.reduce((sum, [name, value]) => sum + utf8Bytes(name) + utf8Bytes(value ?? ''), 0);
  if (bytes > MAX_SECRETS_BYTES) return `expected secrets' names and values to take at most ${MAX_SECRETS_BYTES} bytes together, got ${bytes}`;
  return undefined;
}

/**
 * `secrets`: a mapping of names (envs' rules) to values (text, numbers and booleans as
 * envs write them) or null. The values come out of the parse beside the spec, never in it.
 */
export const secretsSchema = fromParser<SecretValues>((value, report) => {
  if (!isMapping(value)) return report(expectedGot('a mapping of secret names to values (or null, to give the value at submit)', value));
  const secrets: [string, string | null][] = [];
  let failed = false;
  for (const [name, raw] of Object.entries(value)) {
    const text = raw === null ? null : envText(raw);
    const valueProblem = text === undefined ? expectedGot('a string, a number, true/false or null', raw) : text === null ? undefined : envValueProblem(text);
    const problem = secretNameProblem(name) ?? valueProblem;
    if (problem !== undefined) {
      failed = true;
      report(problem, [name]);
    } else {
      secrets.push([name, text as string | null]);
    }
  }
  if (failed) return undefined;
  const values = Object.fromEntries(secrets);
  const tooLarge = totalProblem(values);
  return tooLarge === undefined ? values : report(tooLarge);
});

/** A secret whose name envs also sets: which value the job would see is not clear. */
export function alsoInEnvs(names: readonly string[], envs: Readonly<Record<string, string>>): Problem[] {
  return names
    .filter((name) => Object.hasOwn(envs, name))
    .map((name) => ({ path: ['secrets', name], message: `expected a name envs does not also set, got ${name}, which is in envs` }));
}

/** The secrets a submit stores, and the spec that names them. */
export interface ResolvedSecrets {
  readonly spec: TaskSpec;
  readonly values: Readonly<Record<string, string>>;
}

/**
 * The file's secrets with the submit's `overrides` (they win; a name the file does not
 * have is added), each checked as the file's are. Every secret must then have a value.
 *
 * @throws InvalidTaskSpecError naming each override that breaks a rule, each secret left
 *   without a value (and how to give it), or the limit they exceed together.
 */
export function resolveSecrets(spec: TaskSpec, fromFile: SecretValues, overrides: Readonly<Record<string, string>>): ResolvedSecrets {
  const issues: InputIssue[] = [];
  for (const [name, value] of Object.entries(overrides)) {
    const problem = secretNameProblem(name) ?? envValueProblem(value);
    if (problem !== undefined) issues.push({ path: formatPath(['secrets', name]), message: `${problem} (given with --secret)` });
  }
  if (issues.length > 0) throw new InvalidTaskSpecError(issues);
  // Built from entries, never by assignment, so every name stays a plain own key.
  const merged = Object.fromEntries([...Object.entries(fromFile), ...Object.entries(overrides)]);
  for (const [name, value] of Object.entries(merged)) {
    if (value !== null) continue;
    issues.push({
      path: formatPath(['secrets', name]),
      message: `expected a value at submit: give it with --secret ${name} (from your environment) or --secret ${name}=VALUE`,
    });
  }
  issues.push(...alsoInEnvs(Object.keys(merged), spec.envs).map((problem) => ({ path: formatPath(problem.path), message: problem.message })));
  const tooLarge = totalProblem(merged);
  if (tooLarge !== undefined) issues.push({ path: 'secrets', message: `${tooLarge} (--secret values included)` });
  if (issues.length > 0) throw new InvalidTaskSpecError(issues);
  const values = merged as Record<string, string>;
  const names = Object.keys(values).sort();
  return { spec: names.length === 0 ? spec : { ...spec, secretNames: names }, values };
}

/** A job's tasks as a submit stores them, and the values of all their secrets. */
export interface ResolvedJob {
  readonly specs: readonly TaskSpec[];
  readonly values: Readonly<Record<string, string>>;
}

/**
 * Every task of a parsed file with the submit's env and secret overrides (they apply to
 * every task, as `--env` and `--secret` do in SkyPilot) and its secrets resolved, and the
 * values of all of them together: two tasks may name one secret only with one value.
 *
 * @throws InvalidTaskSpecError with every task's problems, a pipeline's under `task N: `.
 */
export function resolveJob(
  parsed: ParsedJob,
  overrides: { readonly envs?: Readonly<Record<string, string>>; readonly secrets?: Readonly<Record<string, string>> },
): ResolvedJob {
  const specs: TaskSpec[] = [];
  const values = new Map<string, string>();
  const issues: InputIssue[] = [];
  const where = (index: number, path: string) => (parsed.pipeline === null ? path : taskPath(index, path));
  parsed.tasks.forEach((task, index) => {
    try {
      const resolved = resolveSecrets(withEnvOverrides(task.spec, overrides.envs ?? {}), task.secrets, overrides.secrets ?? {});
      specs.push(resolved.spec);
      for (const [name, value] of Object.entries(resolved.values)) {
        if (values.has(name) && values.get(name) !== value) {
          issues.push({ path: where(index, `secrets.${name}`), message: 'expected the value an earlier task gives this secret: one job holds one value per name' });
        }
        values.set(name, value);
      }
    } catch (error) {
      if (!(error instanceof InvalidTaskSpecError)) throw error;
      issues.push(...error.issues.map((issue) => ({ ...issue, path: where(index, issue.path) })));
    }
  });
  if (issues.length > 0) throw new InvalidTaskSpecError(issues);
  return { specs, values: Object.fromEntries(values) };
}
