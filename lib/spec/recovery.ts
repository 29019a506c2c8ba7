// resources.job_recovery: SkyPilot's strategy and restart budget, plus relaunch's extensions.

import * as z from '../zod.ts';
import type { RecoveryPolicy, RecoveryStrategy, RestartBackoff } from './types.ts';
import { exitCodesSchema } from './exit-codes.ts';
import { fromParser, integer, isMapping, validOrUndefined } from './fields.ts';
import { expected, expectedGot, type Problem } from './messages.ts';

const STRATEGIES: readonly RecoveryStrategy[] = ['EAGER_NEXT_REGION', 'FAILOVER'];
const STRATEGY_FORMS = 'EAGER_NEXT_REGION, FAILOVER or none';

/** SkyPilot's defaults: EAGER_NEXT_REGION, no restarts on errors, no exit codes, no extras. */
export const DEFAULT_RECOVERY_POLICY: RecoveryPolicy = {
  strategy: 'EAGER_NEXT_REGION',
  maxRestartsOnErrors: 0,
  recoverOnExitCodes: [],
  failOnExitCodes: [],
  maxRestartsOnExitCodes: null,
  restartBackoff: null,
  onDemandFallbackAfter: null,
};

/** What `restart_backoff: {}` means: 10 s, doubling, at most 300 s, full jitter. */
export const DEFAULT_RESTART_BACKOFF: RestartBackoff = {
  initialSeconds: 10,
  factor: 2,
  maxSeconds: 300,
  jitter: 'full',
};

/** A strategy name, any case; `none` (any case) is SkyPilot's way to ask for the default. */
export const strategySchema = fromParser<RecoveryStrategy>((value, report) => {
  const name = typeof value === 'string' ? value.toUpperCase() : undefined;
  if (name === 'NONE') return DEFAULT_RECOVERY_POLICY.strategy;
  return STRATEGIES.find((strategy) => strategy === name) ?? report(expectedGot(STRATEGY_FORMS, value));
});

const SECONDS = 'a whole number of seconds >= 0';

/** `restart_backoff`'s own keys, in the file's spelling. */
const backoffShape = {
  initial_seconds: z.nullish(integer(SECONDS, 0)),
  factor: z.nullish(z.number({ error: expected('a number >= 1') }).check(z.minimum(1, { error: expected('a number >= 1') }))),
  max_seconds: z.nullish(integer(SECONDS, 0)),
  jitter: z.nullish(z.enum(['full', 'none'], { error: expected('full or none') })),
};

/**
 * `restart_backoff` (relaunch's extension): missing fields take DEFAULT_RESTART_BACKOFF's
 * values, except that a missing max_seconds is never below initial_seconds.
 */
export const restartBackoffSchema = z.pipe(
  z.strictObject(backoffShape, { error: expected('a mapping with initial_seconds, factor, max_seconds, jitter') }),
  z.transform((given): RestartBackoff => {
    const initialSeconds = given.initial_seconds ?? DEFAULT_RESTART_BACKOFF.initialSeconds;
    return {
      initialSeconds,
      factor: given.factor ?? DEFAULT_RESTART_BACKOFF.factor,
      maxSeconds: given.max_seconds ?? Math.max(DEFAULT_RESTART_BACKOFF.maxSeconds, initialSeconds),
      jitter: given.jitter ?? DEFAULT_RESTART_BACKOFF.jitter,
    };
  }),
);

/** The mapping form's keys, in the file's spelling: SkyPilot's three, then relaunch's four. */
const policyShape = {
  strategy: z.nullish(strategySchema),
  max_restarts_on_errors: z.nullish(integer('an integer >= 0', 0)),
  recover_on_exit_codes: z.nullish(exitCodesSchema),
  fail_on_exit_codes: z.nullish(exitCodesSchema),
  max_restarts_on_exit_codes: z.nullish(integer('an integer >= 0', 0)),
  restart_backoff: z.nullish(restartBackoffSchema),
  on_demand_fallback_after: z.nullish(integer('an integer >= 1', 1)),
};

/** The keys a job_recovery mapping may hold. */
export const JOB_RECOVERY_KEYS: readonly string[] = Object.keys(policyShape);
/** The keys a restart_backoff mapping may hold. */
export const RESTART_BACKOFF_KEYS: readonly string[] = Object.keys(backoffShape);

const policyMappingSchema = z.pipe(
  z.strictObject(policyShape, { error: expected(`a strategy (${STRATEGY_FORMS}) or a mapping`) }),
  z.transform(
    (given): RecoveryPolicy => ({
      strategy: given.strategy ?? DEFAULT_RECOVERY_POLICY.strategy,
      maxRestartsOnErrors: given.max_restarts_on_errors ?? 0,
      recoverOnExitCodes: given.recover_on_exit_codes ?? [],
      failOnExitCodes: given.fail_on_exit_codes ?? [],
      maxRestartsOnExitCodes: given.max_restarts_on_exit_codes ?? null,
      restartBackoff: given.restart_backoff ?? null,
      onDemandFallbackAfter: given.on_demand_fallback_after ?? null,
    }),
  ),
);

/** A strategy name alone: SkyPilot's defaults with that strategy. */
const strategyPolicySchema = z.pipe(
  strategySchema,
  z.transform((strategy): RecoveryPolicy => ({ ...DEFAULT_RECOVERY_POLICY, strategy })),
);

/**
 * `resources.job_recovery` (and its older name `spot_recovery`): a strategy name, or the
 * mapping of SkyPilot's strategy, max_restarts_on_errors and recover_on_exit_codes plus
 * relaunch's fail_on_exit_codes, max_restarts_on_exit_codes, restart_backoff and
 * on_demand_fallback_after.
 */
export const jobRecoverySchema = z.pipe(
  z.unknown(),
  z.transform((value, ctx): RecoveryPolicy => {
    const result = typeof value === 'string' ? strategyPolicySchema.safeParse(value) : policyMappingSchema.safeParse(value);
    if (result.success) return result.data;
    // The inner issues keep their codes and paths, so unknown keys are still worded by name.
    ctx.issues.push(...(result.error.issues as z.core.$ZodRawIssue[]));
    return z.NEVER;
  }),
);

/**
 * Cross-field checks of a job_recovery mapping: no code both recovers and fails the job,
 * and restart_backoff's max_seconds is not below its initial_seconds.
 */
export function recoveryProblems(jobRecovery: unknown): Problem[] {
  if (!isMapping(jobRecovery)) return [];
  const problems: Problem[] = [];
  const recover = validOrUndefined(exitCodesSchema, jobRecovery.recover_on_exit_codes) ?? [];
  const fail = validOrUndefined(exitCodesSchema, jobRecovery.fail_on_exit_codes) ?? [];
  const both = fail.filter((code) => recover.includes(code));
  if (both.length > 0) {
    problems.push({
      path: ['fail_on_exit_codes'],
      message: `expected codes not in recover_on_exit_codes, got ${both.join(', ')} in both`,
    });
  }
  const backoff = jobRecovery.restart_backoff;
  if (isMapping(backoff)) {
    const initial = validOrUndefined(backoffShape.initial_seconds, backoff.initial_seconds);
    const max = validOrUndefined(backoffShape.max_seconds, backoff.max_seconds);
    if (initial != null && max != null && max < initial) {
      problems.push({
        path: ['restart_backoff', 'max_seconds'],
        message: expectedGot(`${SECONDS} and >= initial_seconds (${initial})`, max),
      });
    }
  }
  return problems;
}
