// Small zod building blocks shared by the task's fields: typed scalars and hand-written parsers.

import * as z from '../zod.ts';
import { expected } from './messages.ts';
import type { Path } from './path.ts';

/** Whether a value is a mapping (a YAML mapping, a JSON object), not a list or a scalar. */
export function isMapping(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Records a problem at a path relative to the value being parsed. */
export type Report = (message: string, path?: Path) => undefined;

/**
 * A parser for a field that takes several forms (`A100:8`, `{A100: 8}`, a list...): it
 * reports every problem it finds and returns the normalized value, or undefined when it
 * reported at least one problem and has nothing to return.
 */
export type FieldParser<T> = (value: unknown, report: Report) => T | undefined;

/** Turns a hand-written parser into a zod schema, its problems into zod issues. */
export function fromParser<T>(parse: FieldParser<T>): z.ZodMiniType<T, unknown> {
  return z.pipe(
    z.unknown(),
    z.transform((value, ctx) => {
      const out = parse(value, (message, path = []) => {
        ctx.issues.push({ code: 'custom', message, input: value, path: [...path] });
        return undefined;
      });
      return out === undefined ? z.NEVER : out;
    }),
  );
}

/**
 * The value a schema makes of an input, or undefined when the input is invalid: for
 * cross-field checks, which compare only fields that are valid on their own (each field's
 * own problems are reported by the schema already).
 */
export function validOrUndefined<T>(schema: z.ZodMiniType<T, unknown>, value: unknown): T | undefined {
  const result = schema.safeParse(value);
  return result.success ? result.data : undefined;
}

/** A whole number in [min, max] (max optional), every failure worded as `expected <what>`. */
export function integer(what: string, min: number, max = Number.MAX_SAFE_INTEGER) {
  const error = expected(what);
  return z.number({ error }).check(z.int({ error }), z.minimum(min, { error }), z.maximum(max, { error }));
}

/** A boolean field. */
export function flag(what: string) {
  return z.boolean({ error: expected(what) });
}

/**
 * A key that, once written, must have a value: `key:` alone (YAML's null) is an error that
 * says what was expected and what leaving the key out means, as SkyPilot's schema refuses
 * null for job_recovery's keys. Any other value is `schema`'s to judge. Wrap it in
 * `z.optional` for a key that may be left out.
 */
export function valueRequired<T>(schema: z.ZodMiniType<T, unknown>, what: string, byDefault: string): z.ZodMiniType<T, unknown> {
  return z.pipe(
    z.unknown(),
    z.transform((value, ctx) => {
      if (value === null) {
        ctx.issues.push({
          code: 'custom',
          message: `expected ${what}, got no value; leave the key out for the default (${byDefault})`,
          input: value,
          path: [],
        });
        return z.NEVER;
      }
      const result = schema.safeParse(value);
      if (result.success) return result.data;
      // The inner issues keep their codes and paths, so nested keys are still worded by name.
      ctx.issues.push(...(result.error.issues as z.core.$ZodRawIssue[]));
      return z.NEVER;
    }),
  );
}
