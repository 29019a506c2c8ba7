// `relaunch check`, run: options resolved, the account read, the report printed. Loaded
// only when the command runs: the SDK clients it needs would slow every other command.

import { AwsAccountReader, type CheckClients } from '../lib/check/aws-account-reader.ts';
import type { ApiProbe } from '../lib/check/account-reader-port.ts';
import type { CandidateVerdict, CheckReport, CheckResult } from '../lib/check/report.ts';
import { runChecks, type CheckInput } from '../lib/check/run-checks.ts';
import { InvalidInputError, InvalidTaskSpecError } from '../lib/errors.ts';
import { parseJobFile } from '../lib/task-file/parse.ts';
import { configuredApi } from './context.ts';
import { defaultClients, httpApiProbe, localSettings, resolveRegion, stackName } from './check-context.ts';
import { ExitStatus, reportError, type Io } from './exit.ts';
import { readTaskFile, taskSourceName } from './task-file.ts';

/** Options of `relaunch check`. */
export interface CheckOptions {
  /** Print the report as one JSON object: `{ok, checks, verdict?}`. */
  readonly json?: boolean;
  /** The deployed API to check (default: RELAUNCH_API_URL, else the stack's). */
  readonly api?: string;
  /** The region (default: the API URL's, AWS_REGION, the profile's, cdk.json's subnets'). */
  readonly region?: string;
  /** The stack's name. @default - the one cdk.json's prefix gives (stackNameOf), else `Relaunch` */
  readonly stack?: string;
}

/** What the command reads through; tests give clients pointed at moto_server. */
export interface CheckEnvironment {
  clients(home: string): CheckClients & { destroy?(): void };
  readonly api: ApiProbe;
  /** Where cdk.json is looked for. */
  readonly folder: string;
}

const DEFAULT_ENVIRONMENT: CheckEnvironment = { clients: defaultClients, api: httpApiProbe, folder: '.' };

/** Runs `relaunch check` (see cli/commands/check.ts runCheck). */
export async function checkAccount(file: string | undefined, options: CheckOptions, io: Io, environment: CheckEnvironment = DEFAULT_ENVIRONMENT): Promise<ExitStatus> {
  const json = options.json === true;
  let clients: (CheckClients & { destroy?(): void }) | null = null;
  try {
    const task = file === undefined ? null : parseJobFile(await readTaskFile(file), { review: true });
    const given = configuredApi({ api: options.api, dataDir: '' });
    const apiUrl = given === null ? null : { url: given, source: options.api !== undefined ? '--api' : 'RELAUNCH_API_URL' };
    const local = await localSettings(environment.folder);
    const stack = stackName(options.stack, local);
    const region = await resolveRegion(options.region, given, local);
    clients = environment.clients(region.region);
    const input: CheckInput = {
      region: region.region,
      regionSource: region.source,
      stackName: stack,
      apiUrl,
      local,
      task: task === null ? null : { specs: task.tasks.map(({ spec }) => spec), pipeline: task.pipeline !== null },
    };
    const report = await runChecks(input, { reader: new AwsAccountReader(clients), api: environment.api });
    io.out(json ? JSON.stringify(report, null, 2) : render(report, input, file === undefined ? null : taskSourceName(file)));
    return report.ok ? ExitStatus.OK : ExitStatus.JOB_FAILED;
  } catch (error) {
    if (json && (error instanceof InvalidTaskSpecError || error instanceof InvalidInputError)) {
      io.out(JSON.stringify({ ok: false, issues: error.issues }, null, 2));
      return ExitStatus.USAGE;
    }
    return reportError(io, error);
  } finally {
    clients?.destroy?.();
  }
}

/**
 * Text from the account or an API, made safe for a terminal: control characters (an
 * escape sequence in a stack's status reason, a bucket policy's message) shown as `?`.
 */
function plain(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\u0000-\u001f\u007f-\u009f]/g, '?');
}

/** The human report: a header, one line per check (its fix below a failure or warning), the verdict. */
function render(report: CheckReport, input: CheckInput, file: string | null): string {
  const width = Math.max(...report.checks.map((check) => check.id.length));
  const lines = [`relaunch check: ${input.region}, stack ${input.stackName}`];
  for (const check of report.checks) lines.push(...checkLines(check, width));
  const verdict = report.verdict;
  if (verdict !== undefined && file !== null) {
    lines.push('', `${plain(file)}: ${verdict.launchable ? 'would launch now' : 'would not launch now'}`);
    for (const candidate of verdict.candidates) lines.push(...candidateLines(candidate));
  }
  const failed = report.checks.filter((check) => check.status === 'fail').length;
  const warned = report.checks.filter((check) => check.status === 'warn').length;
  lines.push('', failed === 0 ? `nothing stops relaunch${warned === 0 ? '' : `; ${warned} warning${warned === 1 ? '' : 's'}`}` : `${failed} check${failed === 1 ? '' : 's'} failed${warned === 0 ? '' : `, ${warned} warning${warned === 1 ? '' : 's'}`}`);
  return lines.join('\n');
}

function checkLines(check: CheckResult, width: number): string[] {
  const lines = [`  ${check.status.padEnd(4)}  ${plain(check.id).padEnd(width)}  ${plain(check.message)}`];
  if (check.fix !== undefined && check.status !== 'ok') lines.push(`  ${''.padEnd(4)}  ${''.padEnd(width)}  fix: ${plain(check.fix)}`);
  return lines;
}

function candidateLines(candidate: CandidateVerdict): string[] {
  const task = candidate.task === undefined ? '' : `task ${candidate.task + 1}: `;
  const what = `${task}${candidate.instanceType} ${candidate.market} x${candidate.nodes}`;
  if (candidate.launchable === true) {
    return [`  yes   ${what}: ${candidate.places.map((place) => `${place.region} (${place.zones.join(', ')})`).join('; ')}`];
  }
  const label = candidate.launchable === false ? 'no  ' : '?   ';
  return [`  ${label}  ${what}`, ...candidate.reasons.map((reason) => `          ${plain(reason)}`)];
}
