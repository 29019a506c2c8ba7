// How large a task may be: what one stored job, one process environment and one EC2 user
// data can hold, checked at submit so an oversized task is a 400 naming the limit, never a
// store error (a 500) or a launch that fails with E2BIG.

import type { TaskSpec } from './types.ts';

/**
 * The longest `name`, in characters. SkyPilot sets none; 128 reads in a table, fits an
 * EC2 tag value (256) and keeps the job's record, which holds the name twice, far from
 * DynamoDB's 400 KB item limit.
 */
export const MAX_NAME_LENGTH = 128;

/** The longest `workdir`, in characters: Linux's PATH_MAX (4096 bytes, the name ASCII or not). */
export const MAX_WORKDIR_LENGTH = 4096;

/** The most entries `envs` may have (`--env` overrides included). */
export const MAX_ENVS = 256;

/** The longest name in `envs`, in characters (env names are ASCII). */
export const MAX_ENV_NAME_LENGTH = 256;

/**
 * The largest value in `envs`, in bytes of UTF-8: a quarter of the 128 KiB Linux allows
 * one `NAME=value` string (MAX_ARG_STRLEN), above which starting a process fails with E2BIG.
 */
export const MAX_ENV_VALUE_BYTES = 32 * 1024;

/**
 * The most bytes (UTF-8) every env name and value, `setup` and `run` may take together.
 * Linux allows 128 KiB for one argument or env string and about 2 MiB for all of them (a
 * quarter of the 8 MiB stack); the agent exports every env before it runs `setup` and
 * `run`, beside the environment it was started with, so 64 KiB stays well clear of both.
 * On EC2 the same text must also fit, gzipped with the agent, in 16 KiB of user data,
 * which submit and launch check (lib/adapters/ec2-user-data.ts): about 13 KB of ordinary
 * shell fits there (ORDINARY_SHELL_FIT_BYTES, measured by `npm run bench -- user-data`),
 * so a task between that and this limit runs locally and is refused for EC2, saying so.
 */
export const MAX_TASK_TEXT_BYTES = 64 * 1024;

/** Bytes of UTF-8 a string takes: the unit of every byte limit here. */
export function utf8Bytes(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

/** What `MAX_TASK_TEXT_BYTES` counts: every env name and value, `setup` and `run`. */
export function taskTextBytes(spec: Pick<TaskSpec, 'envs' | 'setup' | 'run'>): number {
  let bytes = utf8Bytes(spec.setup ?? '') + utf8Bytes(spec.run ?? '');
  for (const [name, value] of Object.entries(spec.envs)) bytes += utf8Bytes(name) + utf8Bytes(value);
  return bytes;
}

/** The problem of a task whose envs, setup and run are too large together, or undefined. */
export function taskTextProblem(spec: Pick<TaskSpec, 'envs' | 'setup' | 'run'>): string | undefined {
  const bytes = taskTextBytes(spec);
  if (bytes <= MAX_TASK_TEXT_BYTES) return undefined;
  return `expected envs, setup and run to take at most ${MAX_TASK_TEXT_BYTES} bytes together (64 KiB of UTF-8), got ${bytes}`;
}
