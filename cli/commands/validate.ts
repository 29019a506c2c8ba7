// `relaunch validate TASK.yaml`: the normalized task a file means, or every problem in it.

import type { Command } from 'commander';
import { formatIssue, InvalidInputError, InvalidTaskSpecError } from '../../lib/errors.ts';
import { candidatePriceLines } from '../../lib/accounting/format.ts';
import { candidatesOf } from '../../lib/candidates.ts';
import { formatPortRange } from '../../lib/task-file/network-ports.ts';
import { DEFAULT_BOOT_TIMEOUT_SECONDS, DEFAULT_MAX_BOOT_FAILURES, formatDuration } from '../../lib/task-file/bounds.ts';
import { parseJobFile } from '../../lib/task-file/parse.ts';
import { describeReuseChoice, reuseChoice, type ReuseChoice } from '../../lib/reuse-rules.ts';
import { describeSource } from '../../lib/task-file/mounts.ts';
import { taskPath } from '../../lib/located-yaml/path.ts';
import type { Accelerator, ImageId, Quantity, RecoveryPolicy, ResourceOption, Resources, TaskSpec } from '../../lib/task-file/types.ts';
import { exitWith, ExitStatus, reportError, subcommand, type Io } from '../exit.ts';
import { taskSourceName } from '../task-file.ts';
import { launchOverridesOf, readWithOverrides, withLaunchOverrideOptions, type LaunchOverrides } from '../launch-overrides.ts';

/** Options of `relaunch validate`: `run`'s overrides too, so it shows the task `run` would submit. */
export interface ValidateOptions extends LaunchOverrides {
  /** Print one JSON object on stdout, valid or not: `{ok, spec, warnings}` or `{ok, issues}`. */
  readonly json?: boolean;
}

/**
 * Runs `relaunch validate`: reads the file (standard input for `-`), parses it, prints the
 * normalized task (a summary, or `{"ok":true,"spec":...,"warnings":[...]}` with --json)
 * with the review's warnings as well as submit's (lib/task-file/warnings.ts), and returns 0; for an invalid or unreadable file prints every problem (stderr, or
 * `{"ok":false,"issues":[...]}` on stdout with --json) and returns 2. Warnings go to
 * stderr in human mode.
 */
export async function runValidate(file: string, options: ValidateOptions, io: Io): Promise<ExitStatus> {
  const json = options.json === true;
  try {
    const { text } = await readWithOverrides(file, launchOverridesOf(options));
    const { pipeline, tasks, warnings: parsedWarnings } = parseJobFile(text, { review: true });
    const specs = tasks.map((task) => task.spec);
    const found = specs.map((spec, index) => candidatesOf(spec, pipeline === null ? 'resources' : taskPath(index, 'resources')));
    const warnings = [...parsedWarnings, ...found.flatMap((c) => c.warnings)];
    const candidates = found.map((c) => c.candidates);
    if (json) {
      const relaunchNodes = specs.map((spec) => nodesOnRelaunch(spec.resources.jobRecovery));
      const body =
        pipeline === null
          ? { ok: true, spec: specs[0], candidates: candidates[0], relaunchNodes: relaunchNodes[0], warnings }
          : { ok: true, pipeline, tasks: specs, candidates, relaunchNodes, warnings };
      io.out(JSON.stringify(body, null, 2));
      return ExitStatus.OK;
    }
    for (const warning of warnings) io.err(`warning: ${formatIssue(warning)}`);
    if (pipeline === null) {
      io.out([renderSpec(taskSourceName(file), specs[0] as TaskSpec), ...candidatePriceLines(candidates[0] ?? [], 'accelerators  ')].join('\n'));
      return ExitStatus.OK;
    }
    io.out(`${taskSourceName(file)}: a pipeline${pipeline.name === null ? '' : ` (${pipeline.name})`} of ${specs.length} tasks, run in order`);
    specs.forEach((spec, index) => io.out(`\ntask ${index + 1} of ${specs.length}\n${renderSpec(taskSourceName(file), spec)}`));
    return ExitStatus.OK;
  } catch (error) {
    if (!json || !(error instanceof InvalidTaskSpecError || error instanceof InvalidInputError)) {
      return reportError(io, error);
    }
    io.out(JSON.stringify({ ok: false, issues: error.issues }, null, 2));
    return ExitStatus.USAGE;
  }
}

/**
 * The `validate` subcommand. A non-zero status leaves the action as a CommanderError with
 * code `relaunch.exitStatus`, which cli/main.ts turns into the process's exit status.
 */
export function validateCommand(io: Io): Command {
  return withLaunchOverrideOptions(
    subcommand('validate', io)
      .description('check a task file and print the task relaunch would run, or every problem in it')
      .argument('<task>', 'the task file (SkyPilot YAML), or - to read it from standard input')
      .option('--json', 'print one JSON object: {ok, spec, warnings} or {ok, issues}'),
  ).action(async (file: string, options: ValidateOptions) => {
      const status = await runValidate(file, options, io);
      exitWith(status);
    });
}


/** Which nodes a task's relaunches run on, as --json prints it: the effective choice, in words too. */
export interface RelaunchNodes extends ReuseChoice {
  readonly summary: string;
}

/** The effective reuse_nodes choice of a policy (the strategy's default when not given). */
function nodesOnRelaunch(policy: RecoveryPolicy): RelaunchNodes {
  const choice = reuseChoice(policy);
  return { ...choice, summary: describeReuseChoice(choice, policy.strategy) };
}

/** Exit codes as short runs: `[1, 2, 3, 7]` is `1-3, 7`. */
export function codeRuns(codes: readonly number[]): string {
  const runs: [number, number][] = [];
  for (const code of codes) {
    const last = runs.at(-1);
    if (last !== undefined && last[1] === code - 1) last[1] = code;
    else runs.push([code, code]);
  }
  return runs.map(([low, high]) => (low === high ? `${low}` : `${low}-${high}`)).join(', ');
}

function quantity(q: Quantity, unit = ''): string {
  return `${q.value}${q.orMore ? '+' : ''}${unit}`;
}

function image(imageId: ImageId): string {
  if (imageId.kind === 'ami') return imageId.imageId;
  if (imageId.kind === 'alias') return `skypilot:${imageId.alias}`;
  return Object.entries(imageId.byRegion)
    .map(([region, ami]) => `${region} ${ami}`)
    .join(', ');
}

function recovery(policy: RecoveryPolicy): string[] {
  const lines = [`${policy.strategy}, max_restarts_on_errors ${policy.maxRestartsOnErrors}`];
  if (policy.recoverOnExitCodes.length > 0) {
    const cap = policy.maxRestartsOnExitCodes;
    lines.push(
      `recover_on_exit_codes ${codeRuns(policy.recoverOnExitCodes)} (${cap === null ? 'unlimited' : `at most ${cap} restarts`})`,
    );
  }
  if (policy.failOnExitCodes.length > 0) lines.push(`fail_on_exit_codes ${codeRuns(policy.failOnExitCodes)}`);
  const backoff = policy.restartBackoff;
  if (backoff !== null) {
    lines.push(
      `restart_backoff ${backoff.initialSeconds} s x${backoff.factor} up to ${backoff.maxSeconds} s, ${backoff.jitter} jitter`,
    );
  }
  if (policy.onDemandFallbackAfter !== null) {
    lines.push(`on-demand after ${policy.onDemandFallbackAfter} preemptions in a row`);
  }
  if (policy.maxRecoveries != null) lines.push(`max_recoveries ${policy.maxRecoveries}`);
  if (policy.launchOnWarning === true) lines.push('launch_on_warning: the next attempt starts, as a standby, on a spot interruption warning');
  if (policy.launchOnWarning === 'rebalance') {
    lines.push('launch_on_warning: the next attempt starts, as a standby, on a rebalance recommendation or a spot interruption warning');
  }
  const choice = reuseChoice(policy);
  lines.push(describeReuseChoice(choice, policy.strategy));
  const bad = policy.badNodeExitCodes ?? [];
  if (bad.length > 0) {
    lines.push(`bad_node_exit_codes ${codeRuns(bad)} (${choice.reuse ? 'the node that exits one is replaced, the others kept' : 'no effect: relaunches use fresh nodes'})`);
  }
  if (policy.launchTimeoutSeconds != null) lines.push(`launch_timeout ${formatDuration(policy.launchTimeoutSeconds)}`);
  const bootTimeout = policy.bootTimeoutSeconds ?? DEFAULT_BOOT_TIMEOUT_SECONDS;
  if (bootTimeout !== DEFAULT_BOOT_TIMEOUT_SECONDS) lines.push(`boot_timeout ${formatDuration(bootTimeout)}`);
  const bootFailures = policy.maxBootFailures ?? DEFAULT_MAX_BOOT_FAILURES;
  if (bootFailures !== DEFAULT_MAX_BOOT_FAILURES) lines.push(`max_boot_failures ${bootFailures}`);
  return lines;
}

function accelerators(candidates: readonly Accelerator[]): string {
  const names = candidates.map(({ name, count }) => `${name}:${count}`);
  if (names.length <= 1) return names[0] ?? 'none';
  return `any one of ${names.join(', ')}`;
}

/** One `any_of`/`ordered` entry, as what it changes: `us-east-1, A100:8, spot`. */
function option(entry: ResourceOption): string {
  const parts = [
    entry.zone ?? entry.region,
    entry.instanceType,
    entry.cpus && `cpus ${quantity(entry.cpus)}`,
    entry.memoryGb && `memory ${quantity(entry.memoryGb, ' GB')}`,
    entry.accelerators && accelerators(entry.accelerators),
    entry.useSpot === undefined ? null : entry.useSpot ? 'spot' : 'on-demand',
  ].filter(Boolean);
  return parts.length === 0 ? 'as above' : parts.join(', ');
}

function alternativesRows(r: Resources): [string, string[]][] {
  const rows: [string, string[]][] = [];
  if (r.alternatives !== undefined) {
    const label = r.alternatives.mode === 'ordered' ? 'ordered' : 'any_of';
    rows.push([label, r.alternatives.options.map((entry, index) => `${index + 1}. ${option(entry)}`)]);
  }
  if (r.ports !== undefined) rows.push(['ports', [r.ports.map(formatPortRange).join(', ')]]);
  if (r.networkTier !== undefined) rows.push(['network', [r.networkTier === 'best' ? 'best (EFA on instance types that have it)' : 'standard']]);
  return rows;
}

function lineCount(script: string | null): string {
  if (script === null) return '(none)';
  const count = script.trimEnd().split('\n').length;
  return count === 1 ? '1 line' : `${count} lines`;
}

/** The human summary: one labelled row per part of the task, continuation rows indented. */
export function renderSpec(file: string, spec: TaskSpec): string {
  const r = spec.resources;
  const where = [r.region ?? 'any region', r.zone === null ? '' : `zone ${r.zone}`].filter(Boolean).join(', ');
  const machine = [
    r.instanceType,
    r.cpus && `cpus ${quantity(r.cpus)}`,
    r.memoryGb && `memory ${quantity(r.memoryGb, ' GB')}`,
    r.diskSizeGb === null ? null : `disk ${r.diskSizeGb} GB`,
    r.diskTier === undefined ? null : `disk tier ${r.diskTier}`,
  ].filter(Boolean);
  const rows: [string, string[]][] = [
    ['name', [spec.name ?? '(none)']],
    ['nodes', [String(spec.numNodes)]],
    ['cloud', [`aws, ${where}, ${r.alternatives === undefined ? (r.useSpot ? 'spot' : 'on-demand') : 'market per entry'}`]],
    ['machine', [machine.length === 0 ? 'any' : machine.join(', ')]],
    ['accelerators', [accelerators(r.accelerators)]],
    ...alternativesRows(r),
    ['image', [r.imageId === null ? 'default' : image(r.imageId)]],
    ...(r.containerImage === undefined ? [] : ([['container', [`${r.containerImage} (setup and run run in it)`]]] as [string, string[]][])),
    ['recovery', recovery(r.jobRecovery)],
    ['workdir', [spec.gitWorkdir === undefined ? (spec.workdir ?? '(none)') : `${spec.gitWorkdir.url}${spec.gitWorkdir.ref === null ? '' : ` at ${spec.gitWorkdir.ref}`} (git)`]],
    ['mounts', (spec.fileMounts ?? []).map((mount) => `${mount.path} <- ${describeSource(mount.source)}, ${mount.mode}`).concat(spec.fileMounts === undefined ? ['(none)'] : [])],
    ['envs', [Object.keys(spec.envs).join(', ') || '(none)']],
    ['secrets', [(spec.secretNames ?? []).join(', ') || '(none)']],
    ['setup', [lineCount(spec.setup)]],
    ['run', [lineCount(spec.run)]],
  ];
  const width = Math.max(...rows.map(([label]) => label.length));
  const body = rows.flatMap(([label, values]) =>
    values.map((value, index) => `  ${(index === 0 ? label : '').padEnd(width)}  ${value}`),
  );
  return [`${file}: a valid task`, ...body].join('\n');
}

