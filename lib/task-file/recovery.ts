// resources.job_recovery: SkyPilot's strategy and restart budget, plus relaunch's extensions.

import * as z from '../zod.ts';
import type { LaunchOnWarning, RecoveryPolicy, RecoveryStrategy, RestartBackoff, ReuseNodes, ReuseSetup } from './types.ts';
import { exitCodesSchema } from './exit-codes.ts';
import {
  DEFAULT_BOOT_TIMEOUT_SECONDS,
  DEFAULT_MAX_BOOT_FAILURES,
  MAX_BOOT_TIMEOUT_SECONDS,
  MAX_LAUNCH_TIMEOUT_SECONDS,
  MAX_WAIT_SECONDS,
  formatDuration,
  parseDuration,
} from './bounds.ts';
import { fromParser, integer, isMapping, validOrUndefined, valueRequired } from '../located-yaml/fields.ts';
import { describe as describeValue, expected, expectedGot, type Problem } from '../located-yaml/messages.ts';

const STRATEGIES: readonly RecoveryStrategy[] = ['EAGER_NEXT_REGION', 'FAILOVER'];
const STRATEGY_FORMS = 'EAGER_NEXT_REGION or FAILOVER in any case, or a lowercase none';

/** SkyPilot's defaults (EAGER_NEXT_REGION, no restarts on errors, no exit codes) and relaunch's. */
export const DEFAULT_RECOVERY_POLICY: RecoveryPolicy = {
  strategy: 'EAGER_NEXT_REGION',
  maxRestartsOnErrors: 0,
  recoverOnExitCodes: [],
  failOnExitCodes: [],
  maxRestartsOnExitCodes: null,
  restartBackoff: null,
  onDemandFallbackAfter: null,
  launchTimeoutSeconds: null,
  bootTimeoutSeconds: DEFAULT_BOOT_TIMEOUT_SECONDS,
  maxBootFailures: DEFAULT_MAX_BOOT_FAILURES,
  maxRecoveries: null,
  launchOnWarning: false,
};

/** What `restart_backoff: {}` means: 10 s, doubling, at most 300 s, full jitter. */
export const DEFAULT_RESTART_BACKOFF: RestartBackoff = {
  initialSeconds: 10,
  factor: 2,
  maxSeconds: 300,
  jitter: 'full',
};

/**
 * A strategy name, any case; `none` asks for the default, and only in lowercase, as in
 * SkyPilot (whose `NONE` and `None` are errors).
 */
export const strategySchema = fromParser<RecoveryStrategy>((value, report) => {
  if (value === 'none') return DEFAULT_RECOVERY_POLICY.strategy;
  const name = typeof value === 'string' ? value.toUpperCase() : undefined;
  const strategy = STRATEGIES.find((known) => known === name);
  if (strategy !== undefined) return strategy;
  const hint = name === 'NONE' ? ' (only the lowercase none means the default strategy, as in SkyPilot)' : '';
  return report(`${expectedGot(STRATEGY_FORMS, value)}${hint}`);
});

const WAIT_LIMIT = `${MAX_WAIT_SECONDS} (${MAX_WAIT_SECONDS / 86_400} days)`;
const SECONDS = `a whole number of seconds from 0 to ${WAIT_LIMIT}`;

/** `restart_backoff`'s own keys, in the file's spelling; each, once written, needs a value. */
const backoffShape = {
  initial_seconds: z.optional(valueRequired(integer(SECONDS, 0, MAX_WAIT_SECONDS), SECONDS, `${DEFAULT_RESTART_BACKOFF.initialSeconds}`)),
  factor: z.optional(
    valueRequired(
      z.number({ error: expected('a number >= 1') }).check(z.minimum(1, { error: expected('a number >= 1') })),
      'a number >= 1',
      `${DEFAULT_RESTART_BACKOFF.factor}`,
    ),
  ),
  max_seconds: z.optional(
    valueRequired(integer(SECONDS, 0, MAX_WAIT_SECONDS), SECONDS, `${DEFAULT_RESTART_BACKOFF.maxSeconds}, or initial_seconds if larger`),
  ),
  jitter: z.optional(valueRequired(z.enum(['full', 'none'], { error: expected('full or none') }), 'full or none', DEFAULT_RESTART_BACKOFF.jitter)),
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

/** What a duration field expects, in its error messages: its bounds and a few examples. */
function durationForms(min: number, max: number, examples: string): string {
  return `a duration from ${formatDuration(min)} to ${formatDuration(max)} such as ${examples}`;
}

/** A duration such as `6h`, `30m`, `90s` or `1h30m`, in whole seconds within [min, max]. */
function durationSchema(what: string, min: number, max: number) {
  return fromParser<number>((value, report) => {
    if (typeof value === 'number') return report(`${expectedGot(what, value)} (give a unit: ${value}s is ${value} seconds)`);
    const seconds = typeof value === 'string' ? parseDuration(value) : undefined;
    return seconds !== undefined && seconds >= min && seconds <= max ? seconds : report(expectedGot(what, value));
  });
}

const LAUNCH_ON_WARNING_FORMS = 'true, false or rebalance';

/**
 * `launch_on_warning`: a YAML boolean, or `rebalance` (exactly: EC2's own word for its
 * rebalance recommendation). A quoted "true" is refused: it is a string, not the option.
 */
const launchOnWarningSchema = fromParser<LaunchOnWarning>((value, report) => {
  if (typeof value === 'boolean' || value === 'rebalance') return value;
  const hint = typeof value === 'string' && ['true', 'false'].includes(value.trim().toLowerCase()) ? ' (write it without quotes)' : '';
  return report(`${expectedGot(LAUNCH_ON_WARNING_FORMS, value)}${hint}`);
});

const SETUP_FORMS = 'skip or rerun';
const REUSE_NODES_FORMS = `true, false, or a mapping {setup: ${SETUP_FORMS}}`;
const REUSE_NODES_DEFAULT = "the strategy's: FAILOVER reuses nodes, EAGER_NEXT_REGION launches fresh ones";
const SETUPS: readonly ReuseSetup[] = ['skip', 'rerun'];

/** The hint for a boolean written in quotes, which YAML reads as a string. */
function quotedBooleanHint(value: unknown): string {
  return typeof value === 'string' && ['true', 'false'].includes(value.trim().toLowerCase()) ? ' (write it without quotes)' : '';
}

/**
 * `reuse_nodes` (relaunch's extension): `true` reuses the healthy nodes and runs setup on
 * them again; `false` launches fresh nodes; a mapping reuses them, its `setup` (`skip` or
 * `rerun`, default `rerun`) saying whether setup runs again on a kept node. A mapping with
 * any other key is refused: a misspelt `setup` must not silently rerun setup.
 */
const reuseNodesSchema = fromParser<ReuseNodes>((value, report) => {
  if (typeof value === 'boolean') return { reuse: value, setup: 'rerun' };
  if (!isMapping(value)) return report(`${expectedGot(REUSE_NODES_FORMS, value)}${quotedBooleanHint(value)}`);
  let failed = false;
  for (const key of Object.keys(value).filter((name) => name !== 'setup')) {
    failed = true;
    report(`unknown key: a reuse_nodes mapping takes only setup (${SETUP_FORMS})`, [key]);
  }
  const given = value.setup;
  const setup = given === undefined ? 'rerun' : SETUPS.find((known) => known === given);
  if (setup === undefined) {
    const none = given === null ? ', got no value; leave the key out for the default (rerun)' : `, got ${describeValue(given)}`;
    return report(`expected ${SETUP_FORMS}${none}`, ['setup']);
  }
  return failed ? undefined : { reuse: true, setup };
});

const BAD_NODE_CODES_FORMS = 'a non-zero exit code 1-255 or a list of them';

/**
 * `bad_node_exit_codes` (relaunch's extension): recover_on_exit_codes' forms, ranges
 * included, without 0: a node that exits 0 succeeded, it cannot be the bad one.
 */
const badNodeExitCodesSchema = z.pipe(
  exitCodesSchema,
  z.transform((codes, ctx) => {
    if (codes.includes(0)) {
      ctx.issues.push({ code: 'custom', message: 'expected non-zero codes (0 is success: a node that exits 0 is never the bad one), got 0', input: codes, path: [] });
      return z.NEVER;
    }
    return codes;
  }),
);

const LAUNCH_TIMEOUT_FORMS = durationForms(0, MAX_LAUNCH_TIMEOUT_SECONDS, '6h, 30m or 90s');
const BOOT_TIMEOUT_FORMS = durationForms(1, MAX_BOOT_TIMEOUT_SECONDS, '10m or 90s');

/**
 * The mapping form's keys, in the file's spelling: SkyPilot's three, then relaunch's own.
 * A key written with no value is an error, as in SkyPilot (strategy aside, which SkyPilot
 * lets be null); leaving it out gives its default.
 */
const policyShape = {
  // SkyPilot's schema allows a null strategy, and treats it as a strategy left out.
  strategy: z.optional(z.nullable(strategySchema)),
  max_restarts_on_errors: z.optional(valueRequired(integer('an integer >= 0', 0), 'an integer >= 0', '0')),
  recover_on_exit_codes: z.optional(valueRequired(exitCodesSchema, 'an exit code 0-255 or a list of them', 'no codes')),
  fail_on_exit_codes: z.optional(valueRequired(exitCodesSchema, 'an exit code 0-255 or a list of them', 'no codes')),
  max_restarts_on_exit_codes: z.optional(valueRequired(integer('an integer >= 0', 0), 'an integer >= 0', 'no cap')),
  restart_backoff: z.optional(valueRequired(restartBackoffSchema, 'a mapping with initial_seconds, factor, max_seconds, jitter', 'no backoff')),
  on_demand_fallback_after: z.optional(valueRequired(integer('an integer >= 1', 1), 'an integer >= 1', 'never')),
  launch_timeout: z.optional(valueRequired(durationSchema(LAUNCH_TIMEOUT_FORMS, 0, MAX_LAUNCH_TIMEOUT_SECONDS), LAUNCH_TIMEOUT_FORMS, 'no limit')),
  boot_timeout: z.optional(
    valueRequired(durationSchema(BOOT_TIMEOUT_FORMS, 1, MAX_BOOT_TIMEOUT_SECONDS), BOOT_TIMEOUT_FORMS, formatDuration(DEFAULT_BOOT_TIMEOUT_SECONDS)),
  ),
  max_boot_failures: z.optional(valueRequired(integer('an integer >= 1', 1), 'an integer >= 1', `${DEFAULT_MAX_BOOT_FAILURES}`)),
  max_recoveries: z.optional(valueRequired(integer('an integer >= 0', 0), 'an integer >= 0', 'no cap')),
  launch_on_warning: z.optional(valueRequired(launchOnWarningSchema, LAUNCH_ON_WARNING_FORMS, 'false')),
  reuse_nodes: z.optional(valueRequired(reuseNodesSchema, REUSE_NODES_FORMS, REUSE_NODES_DEFAULT)),
  bad_node_exit_codes: z.optional(valueRequired(badNodeExitCodesSchema, BAD_NODE_CODES_FORMS, 'no codes')),
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
      launchTimeoutSeconds: given.launch_timeout ?? null,
      bootTimeoutSeconds: given.boot_timeout ?? DEFAULT_BOOT_TIMEOUT_SECONDS,
      maxBootFailures: given.max_boot_failures ?? DEFAULT_MAX_BOOT_FAILURES,
      maxRecoveries: given.max_recoveries ?? null,
      launchOnWarning: given.launch_on_warning ?? false,
      // Left out when not given, so a job stored before these keys reads the same.
      ...(given.reuse_nodes === undefined ? {} : { reuseNodes: given.reuse_nodes }),
      ...(given.bad_node_exit_codes === undefined ? {} : { badNodeExitCodes: given.bad_node_exit_codes }),
    }),
  ),
);

/** A strategy name alone: the defaults with that strategy. */
const strategyPolicySchema = z.pipe(
  strategySchema,
  z.transform((strategy): RecoveryPolicy => ({ ...DEFAULT_RECOVERY_POLICY, strategy })),
);

/**
 * `resources.job_recovery` (and its legacy name `spot_recovery`): a strategy name, or the
 * mapping of SkyPilot's strategy, max_restarts_on_errors and recover_on_exit_codes plus
 * relaunch's fail_on_exit_codes, max_restarts_on_exit_codes, restart_backoff,
 * on_demand_fallback_after, launch_timeout, boot_timeout, max_boot_failures, max_recoveries,
 * launch_on_warning, reuse_nodes and bad_node_exit_codes.
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
 * no bad-node code fails it (a code in fail_on_exit_codes ends the job, so no relaunch
 * would ever replace the node), and restart_backoff's max_seconds is not below its
 * initial_seconds. A bad-node code may be in recover_on_exit_codes: that says the job
 * relaunches on it, uncharged, and the node that exited with it is replaced.
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
  const bad = validOrUndefined(badNodeExitCodesSchema, jobRecovery.bad_node_exit_codes) ?? [];
  const badAndFail = fail.filter((code) => bad.includes(code));
  if (badAndFail.length > 0) {
    problems.push({
      path: ['bad_node_exit_codes'],
      message: `expected codes not in fail_on_exit_codes (a code there ends the job, so no relaunch replaces the node), got ${badAndFail.join(', ')} in both`,
    });
  }
  const backoff = jobRecovery.restart_backoff;
  if (isMapping(backoff)) {
    const initial = validOrUndefined(backoffShape.initial_seconds, backoff.initial_seconds);
    const max = validOrUndefined(backoffShape.max_seconds, backoff.max_seconds);
    if (initial != null && max != null && max < initial) {
      problems.push({
        path: ['restart_backoff', 'max_seconds'],
        message: expectedGot(`a whole number of seconds >= initial_seconds (${initial})`, max),
      });
    }
  }
  return problems;
}
