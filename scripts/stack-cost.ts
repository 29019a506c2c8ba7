// What a deployment of the shipped app costs by itself, from its synthesized templates:
// idle for a month (alarms, the dashboard, the janitor's schedule, any key, secret or web ACL),
// and per job (state transitions, Lambda, API Gateway, DynamoDB, X-Ray, CloudWatch Logs).
// The per-job counts come from bench:scale's simulation (bench/scale/) run on the
// template's own state machine definition for one job of one node that succeeds on its
// first attempt; prices are bench/scale/limits.ts's PRICES, us-east-1.
//
//   node --import tsx scripts/stack-cost.ts           # print the figures
//   node --import tsx scripts/stack-cost.ts --write   # and rewrite them in docs/aws.md
//
// test/unit/scripts/stack-cost.test.ts fails when docs/aws.md and the templates disagree.

import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { App } from 'aws-cdk-lib';
import type { AslDefinition } from '../infra/asl.ts';
import { configFromContext } from '../infra/config.ts';
import { LAMBDA_NAMES, LambdaName } from '../infra/lambda-catalog.ts';
import { addDeployment } from '../infra/relaunch-stack.ts';
import { EC2_LAUNCH_PACE } from '../lib/launch-pace.ts';
import { PRICES } from '../bench/scale/limits.ts';
import { MODEL, runScaleSimulation, type ScaleResult } from '../bench/scale/simulation.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** The page the figures are written into, between these two lines. */
export const COST_DOC = `${ROOT}docs/aws.md`;
export const BEGIN_MARK = '<!-- stack-cost: begin (written by node --import tsx scripts/stack-cost.ts --write) -->';
export const END_MARK = '<!-- stack-cost: end -->';

/** Hours in AWS's billing month. */
const HOURS_PER_MONTH = 730;

/**
 * Bytes a Lambda invocation writes to CloudWatch Logs (the platform's START, END and
 * REPORT lines and one JSON line of relaunch's), and API Gateway's access log line per
 * request: assumed sizes, not measured; the job's own output is priced per GB apart.
 */
export const ASSUMED_LOG_BYTES = { perInvocation: 1_000, perApiRequest: 400 } as const;

/** A CloudFormation template, as much of it as the cost reads. */
export interface CfnTemplate {
  readonly Resources: Record<string, { readonly Type: string; readonly Properties?: Record<string, unknown>; readonly Metadata?: Record<string, unknown> }>;
}

/** One priced line. */
export interface CostLine {
  readonly item: string;
  readonly count: number;
  readonly unit: string;
  readonly dollars: number;
}

/** The stack's cost: a month with no job, one job (one node, one attempt), and each hour it runs. */
export interface StackCost {
  readonly idle: readonly CostLine[];
  readonly perJob: readonly CostLine[];
  readonly perRunHour: readonly CostLine[];
  readonly logGroups: number;
  readonly freeAtRest: readonly string[];
}

/** What bench:scale's simulation counted for one job. */
export interface JobCounts {
  readonly transitions: number;
  readonly invocations: ReadonlyMap<string, number>;
  readonly apiRequests: number;
  readonly writeUnits: number;
  readonly readUnits: number;
  readonly awsEvents: number;
  readonly executions: number;
}

/**
 * The shipped app's templates (infra/app.ts's stacks, with cdk.json's context), synthesized
 * in this process without bundling the Lambdas (their code does not change what is billed).
 */
export function synthesizedTemplates(context: Record<string, unknown> = cdkJsonContext()): CfnTemplate[] {
  const app = new App({ context: { ...context, 'aws:cdk:bundling-stacks': [] } });
  addDeployment(app, configFromContext((key) => app.node.tryGetContext(key)));
  return app.synth().stacks.map((stack) => stack.template as CfnTemplate);
}

/** cdk.json's context, as `cdk synth` gives the app. */
function cdkJsonContext(): Record<string, unknown> {
  return (JSON.parse(readFileSync(`${ROOT}cdk.json`, 'utf8')) as { context: Record<string, unknown> }).context;
}

function resourcesOf(templates: readonly CfnTemplate[], type: string): [string, NonNullable<CfnTemplate['Resources'][string]['Properties']>][] {
  return templates.flatMap((template) => Object.entries(template.Resources).filter(([, resource]) => resource.Type === type).map(([id, resource]): [string, Record<string, unknown>] => [id, resource.Properties ?? {}]));
}

/** The pseudo parameters as in us-east-1 of the standard partition (the prices' region). */
const PSEUDO: Readonly<Record<string, string>> = { 'AWS::Partition': 'aws', 'AWS::Region': 'us-east-1', 'AWS::AccountId': '000000000000', 'AWS::URLSuffix': 'amazonaws.com' };

/**
 * An intrinsic, as text: pseudo parameters as in us-east-1 (service integrations such as
 * `arn:aws:states:::lambda:invoke.waitForTaskToken` are told apart by them); a resource's
 * attribute or reference by a stand-in, Task states being bound by name.
 */
function flatten(value: unknown): string {
  if (typeof value === 'string') return value;
  const record = value as Record<string, unknown>;
  const join = record['Fn::Join'] as [string, unknown[]] | undefined;
  if (join !== undefined) return join[1].map(flatten).join(join[0]);
  const ref = record.Ref;
  if (typeof ref === 'string' && PSEUDO[ref] !== undefined) return PSEUDO[ref];
  return `resolved-at-deploy:${JSON.stringify(value).replace(/[^A-Za-z0-9:.-]/g, '')}`;
}

/** The controller's definition as the template ships it (the one state machine of the stack). */
export function definitionOf(templates: readonly CfnTemplate[]): AslDefinition {
  const machines = resourcesOf(templates, 'AWS::StepFunctions::StateMachine');
  if (machines.length !== 1) throw new Error(`expected one state machine in the templates, found ${machines.length}`);
  const [, props] = machines[0] as [string, Record<string, unknown>];
  if (props.StateMachineType !== undefined && props.StateMachineType !== 'STANDARD') throw new Error(`the cost prices a STANDARD state machine, got ${String(props.StateMachineType)}`);
  return JSON.parse(flatten(props.DefinitionString)) as AslDefinition;
}

/** One job of one node that succeeds at once, running `runHours`, through bench:scale's simulation on `asl`. */
async function simulateOneJob(asl: AslDefinition, runHours: number): Promise<ScaleResult> {
  const runSeconds = runHours * 3600;
  return runScaleSimulation({ jobs: 1, seed: 1, asl, pace: EC2_LAUNCH_PACE, jobListProjection: 'KEYS_ONLY', submitSeconds: 1, runSeconds: [runSeconds, runSeconds], jobShape: { nodes: 1, attempts: [] } });
}

/** The counts of a run, the janitor's left out: it runs on its schedule, job or not (priced as idle). */
function countsOf(result: ScaleResult): JobCounts {
  const invocations = new Map([...result.lambda.invocations].filter(([name]) => name !== LambdaName.janitor));
  return {
    transitions: result.sfn.transitions,
    invocations,
    apiRequests: result.api.requests,
    writeUnits: result.dynamo.writeUnits,
    readUnits: result.dynamo.readUnits,
    awsEvents: result.eventBridge.ec2Events + result.eventBridge.executionEvents,
    executions: result.sfn.starts,
  };
}

/** Counts of one job running one hour, and what each further hour adds (two runs, 1 h and 2 h). */
export async function jobCounts(asl: AslDefinition): Promise<{ readonly job: JobCounts; readonly hour: JobCounts }> {
  const one = countsOf(await simulateOneJob(asl, 1));
  const two = countsOf(await simulateOneJob(asl, 2));
  if (one.executions !== 1) throw new Error(`the simulation started ${one.executions} executions for one job`);
  const names = new Set([...one.invocations.keys(), ...two.invocations.keys()]);
  const hour: JobCounts = {
    transitions: two.transitions - one.transitions,
    invocations: new Map([...names].map((name) => [name, (two.invocations.get(name) ?? 0) - (one.invocations.get(name) ?? 0)])),
    apiRequests: two.apiRequests - one.apiRequests,
    writeUnits: two.writeUnits - one.writeUnits,
    readUnits: two.readUnits - one.readUnits,
    awsEvents: two.awsEvents - one.awsEvents,
    executions: 0,
  };
  return { job: one, hour };
}

/** Each Lambda of the templates by relaunch's name for it: its memory (GB), architecture, and whether X-Ray traces it. */
function functionsOf(templates: readonly CfnTemplate[]): Map<string, { gb: number; arm: boolean; traced: boolean; id: string }> {
  const found = new Map<string, { gb: number; arm: boolean; traced: boolean; id: string }>();
  for (const [id, props] of resourcesOf(templates, 'AWS::Lambda::Function')) {
    // Logical ids are the construct path's ids run together: RelaunchFunctions<name without dashes><hash>.
    const name = LAMBDA_NAMES.find((candidate) => new RegExp(`^RelaunchFunctions${candidate.replace(/-/g, '')}[0-9A-F]{8}$`).test(id));
    if (name === undefined) continue;
    const architectures = (props.Architectures as string[] | undefined) ?? ['x86_64'];
    found.set(name, {
      id,
      gb: Number(props.MemorySize ?? 128) / 1024,
      arm: architectures.includes('arm64'),
      traced: (props.TracingConfig as { Mode?: string } | undefined)?.Mode === 'Active',
    });
  }
  return found;
}

/** Lambda requests, GB-seconds (at each function's memory and architecture, MODEL's durations), X-Ray traces and log bytes of some invocations. */
function lambdaLines(invocations: ReadonlyMap<string, number>, functions: ReturnType<typeof functionsOf>, label: string): { lines: CostLine[]; traces: number; logBytes: number } {
  let requests = 0;
  let gbSecondsArm = 0;
  let gbSecondsX86 = 0;
  let traces = 0;
  for (const [name, count] of invocations) {
    const fn = functions.get(name);
    if (fn === undefined) throw new Error(`the simulation invoked ${name}, which the templates do not have`);
    const ms = MODEL.lambdaMs[name];
    if (ms === undefined) throw new Error(`bench/scale/simulation.ts's MODEL.lambdaMs has no duration for ${name}`);
    const seconds = ms / 1000;
    requests += count;
    if (fn.arm) gbSecondsArm += count * seconds * fn.gb;
    else gbSecondsX86 += count * seconds * fn.gb;
    if (fn.traced) traces += count;
  }
  const lines: CostLine[] = [
    { item: `Lambda requests${label}`, count: requests, unit: 'requests', dollars: requests * PRICES.lambdaPerRequest },
    { item: `Lambda duration${label}`, count: gbSecondsArm + gbSecondsX86, unit: 'GB-seconds', dollars: gbSecondsArm * PRICES.lambdaPerGbSecondArm + gbSecondsX86 * PRICES.lambdaPerGbSecondX86 },
  ];
  return { lines, traces, logBytes: requests * ASSUMED_LOG_BYTES.perInvocation };
}

/** Invocations a month of each scheduled rule's Lambda targets (`rate(N minutes|hours)`). */
function scheduledInvocations(templates: readonly CfnTemplate[], functions: ReturnType<typeof functionsOf>): Map<string, number> {
  const byId = new Map([...functions].map(([name, fn]) => [fn.id, name]));
  const monthly = new Map<string, number>();
  for (const [id, props] of resourcesOf(templates, 'AWS::Events::Rule')) {
    const schedule = props.ScheduleExpression;
    if (typeof schedule !== 'string') continue;
    const rate = /^rate\((\d+) (minute|minutes|hour|hours)\)$/.exec(schedule);
    if (rate === null) throw new Error(`rule ${id}: the cost reads rate(N minutes|hours) schedules only, got ${schedule}`);
    const minutes = Number(rate[1]) * (rate[2]?.startsWith('hour') === true ? 60 : 1);
    for (const target of (props.Targets as { Arn?: { 'Fn::GetAtt'?: [string, string] } }[] | undefined) ?? []) {
      const name = byId.get(target.Arn?.['Fn::GetAtt']?.[0] ?? '');
      if (name !== undefined) monthly.set(name, (monthly.get(name) ?? 0) + (HOURS_PER_MONTH * 60) / minutes);
    }
  }
  return monthly;
}

/**
 * The events one job of one node sends the default bus: its instance's state changes
 * (pending, running, shutting-down, terminated) and its execution's (RUNNING, SUCCEEDED).
 */
const JOB_EVENTS: readonly { readonly source: string; readonly detailType: string; readonly detail: Readonly<Record<string, string>> }[] = [
  ...['pending', 'running', 'shutting-down', 'terminated'].map((state) => ({ source: 'aws.ec2', detailType: 'EC2 Instance State-change Notification', detail: { state } })),
  ...['RUNNING', 'SUCCEEDED'].map((status) => ({ source: 'aws.states', detailType: 'Step Functions Execution Status Change', detail: { status } })),
];

/**
 * The Lambda invocations the templates' event rules make for one job's events, by
 * function; and the functions any event rule invokes (the simulation's own counts of
 * those are replaced by these, the rules being what decides them on AWS).
 */
function eventInvocations(templates: readonly CfnTemplate[], functions: ReturnType<typeof functionsOf>): { perJob: Map<string, number>; driven: Set<string> } {
  const byId = new Map([...functions].map(([name, fn]) => [fn.id, name]));
  const perJob = new Map<string, number>();
  const driven = new Set<string>();
  for (const [, props] of resourcesOf(templates, 'AWS::Events::Rule')) {
    const pattern = props.EventPattern as { source?: string[]; 'detail-type'?: string[]; detail?: Record<string, unknown[]> } | undefined;
    if (pattern === undefined) continue;
    const targets = ((props.Targets as { Arn?: { 'Fn::GetAtt'?: [string, string] } }[] | undefined) ?? []).map((target) => byId.get(target.Arn?.['Fn::GetAtt']?.[0] ?? '')).filter((name): name is string => name !== undefined);
    for (const name of targets) driven.add(name);
    const matched = JOB_EVENTS.filter(
      (event) =>
        (pattern.source ?? []).includes(event.source) &&
        (pattern['detail-type'] ?? []).includes(event.detailType) &&
        Object.entries(event.detail).every(([key, value]) => pattern.detail?.[key] === undefined || pattern.detail[key]?.includes(value) === true),
    ).length;
    for (const name of targets) perJob.set(name, (perJob.get(name) ?? 0) + matched);
  }
  return { perJob, driven };
}

/** The per-job (or per-hour) lines of some counts. */
function usageLines(counts: JobCounts, functions: ReturnType<typeof functionsOf>, apiTraced: boolean, machineTraced: boolean): CostLine[] {
  const lambda = lambdaLines(counts.invocations, functions, '');
  // Traces: each API request (the api function joins it), each execution (its steps join it), each
  // EventBridge-driven invocation; at a deployment's rates X-Ray's default rule records every one.
  const traces = (apiTraced ? counts.apiRequests : 0) + (machineTraced ? counts.executions : 0) + counts.awsEvents;
  const logBytes = lambda.logBytes + counts.apiRequests * ASSUMED_LOG_BYTES.perApiRequest;
  return [
    { item: 'Step Functions state transitions', count: counts.transitions, unit: 'transitions', dollars: counts.transitions * PRICES.sfnPerStateTransition },
    ...lambda.lines,
    { item: 'API Gateway REST requests', count: counts.apiRequests, unit: 'requests', dollars: counts.apiRequests * PRICES.apiGatewayRestPerRequest },
    { item: 'DynamoDB write request units', count: counts.writeUnits, unit: 'WRU', dollars: counts.writeUnits * PRICES.dynamoPerWriteUnit },
    { item: 'DynamoDB read request units', count: counts.readUnits, unit: 'RRU', dollars: counts.readUnits * PRICES.dynamoPerReadUnit },
    { item: 'X-Ray traces recorded', count: traces, unit: 'traces', dollars: traces * PRICES.xrayPerTraceRecorded },
    { item: 'CloudWatch Logs ingested (assumed sizes)', count: logBytes / 1e9, unit: 'GB', dollars: (logBytes / 1e9) * PRICES.logsIngestionPerGb },
  ];
}

/** Prices the templates: idle a month, and one job with `counts`. Pure: a new alarm in a template changes `idle`. */
export function stackCost(templates: readonly CfnTemplate[], counts: { readonly job: JobCounts; readonly hour: JobCounts }): StackCost {
  const functions = functionsOf(templates);
  const alarms = resourcesOf(templates, 'AWS::CloudWatch::Alarm');
  const highResolution = alarms.filter(([, props]) => Number(props.Period ?? 60) < 60).length;
  const standard = alarms.length - highResolution;
  const dashboards = resourcesOf(templates, 'AWS::CloudWatch::Dashboard').length;
  const count = (type: string) => resourcesOf(templates, type).length;
  const advancedParameters = resourcesOf(templates, 'AWS::SSM::Parameter').filter(([, props]) => props.Tier === 'Advanced').length;
  const webAcls = resourcesOf(templates, 'AWS::WAFv2::WebACL');
  const wafRules = webAcls.reduce((sum, [, props]) => sum + ((props.Rules as unknown[] | undefined)?.length ?? 0), 0);
  for (const [id, props] of resourcesOf(templates, 'AWS::DynamoDB::Table')) {
    if (props.BillingMode !== 'PAY_PER_REQUEST') throw new Error(`table ${id}: the cost prices on-demand tables only, got ${String(props.BillingMode)}`);
  }
  const scheduled = lambdaLines(scheduledInvocations(templates, functions), functions, ' (scheduled: the janitor)');
  const idle: CostLine[] = [
    { item: 'CloudWatch alarms, standard resolution', count: standard, unit: 'alarms', dollars: standard * PRICES.cloudWatchAlarmMonth },
    { item: 'CloudWatch alarms, high resolution', count: highResolution, unit: 'alarms', dollars: highResolution * PRICES.cloudWatchHighResolutionAlarmMonth },
    { item: 'CloudWatch dashboards', count: dashboards, unit: 'dashboards', dollars: dashboards * PRICES.cloudWatchDashboardMonth },
    ...scheduled.lines,
    { item: 'X-Ray traces recorded (scheduled)', count: scheduled.traces, unit: 'traces', dollars: scheduled.traces * PRICES.xrayPerTraceRecorded },
    { item: 'CloudWatch Logs ingested (scheduled, assumed sizes)', count: scheduled.logBytes / 1e9, unit: 'GB', dollars: (scheduled.logBytes / 1e9) * PRICES.logsIngestionPerGb },
    { item: 'KMS customer managed keys', count: count('AWS::KMS::Key'), unit: 'keys', dollars: count('AWS::KMS::Key') * PRICES.kmsKeyMonth },
    { item: 'Secrets Manager secrets', count: count('AWS::SecretsManager::Secret'), unit: 'secrets', dollars: count('AWS::SecretsManager::Secret') * PRICES.secretsManagerSecretMonth },
    { item: 'SSM advanced parameters', count: advancedParameters, unit: 'parameters', dollars: advancedParameters * PRICES.ssmAdvancedParameterMonth },
    { item: 'WAF web ACLs and their rules', count: webAcls.length, unit: 'web ACLs', dollars: webAcls.length * PRICES.wafWebAclMonth + wafRules * PRICES.wafRuleMonth },
  ];
  const stages = resourcesOf(templates, 'AWS::ApiGateway::Stage');
  const apiTraced = stages.some(([, props]) => props.TracingEnabled === true);
  const machineTraced = resourcesOf(templates, 'AWS::StepFunctions::StateMachine').some(([, props]) => (props.TracingConfiguration as { Enabled?: boolean } | undefined)?.Enabled === true);
  const freeAtRest = ['AWS::DynamoDB::Table', 'AWS::S3::Bucket', 'AWS::SQS::Queue', 'AWS::SNS::Topic', 'AWS::ApiGateway::RestApi', 'AWS::StepFunctions::StateMachine', 'AWS::Events::Rule']
    .map((type) => [type, count(type)] as const)
    .filter(([, n]) => n > 0)
    .map(([type, n]) => `${n} ${type.split('::').slice(1).join(' ')}`);
  // What the rules invoke for the job's events, instead of the simulation's model of them.
  const events = eventInvocations(templates, functions);
  const byRules = (of: JobCounts, job: boolean): JobCounts => {
    const invocations = new Map([...of.invocations].filter(([name]) => !events.driven.has(name)));
    if (job) for (const [name, n] of events.perJob) if (n > 0) invocations.set(name, n);
    return { ...of, invocations, awsEvents: job ? [...events.perJob.values()].reduce((sum, n) => sum + n, 0) : 0 };
  };
  return {
    idle,
    perJob: usageLines(byRules(counts.job, true), functions, apiTraced, machineTraced),
    perRunHour: usageLines(byRules(counts.hour, false), functions, apiTraced, machineTraced),
    logGroups: count('AWS::Logs::LogGroup'),
    freeAtRest,
  };
}

const total = (lines: readonly CostLine[]) => lines.reduce((sum, line) => sum + line.dollars, 0);

function usd(value: number): string {
  if (value === 0) return '$0';
  if (value >= 0.1) return `$${value.toFixed(2)}`;
  return `$${value.toPrecision(2)}`;
}

function amount(line: CostLine): string {
  const n = line.unit === 'GB' ? line.count.toPrecision(2) : Number.isInteger(line.count) ? line.count.toLocaleString('en-US') : line.count.toLocaleString('en-US', { maximumFractionDigits: 1 });
  return `${n} ${line.unit}`;
}

/** The figures as docs/aws.md shows them, between the marks. */
export function renderCost(cost: StackCost): string {
  const table = (lines: readonly CostLine[], totalLabel: string) => [
    '| item | amount | cost |',
    '|---|---:|---:|',
    ...lines.map((line) => `| ${line.item} | ${amount(line)} | ${usd(line.dollars)} |`),
    `| **${totalLabel}** | | **${usd(total(lines))}** |`,
  ];
  return [
    BEGIN_MARK,
    `**Idle, a month with no job: ${usd(total(cost.idle))}.** Per job (one node, one attempt, running an hour): ${usd(total(cost.perJob))}, and ${usd(total(cost.perRunHour))} for each further hour it runs. The jobs' instances and their volumes are billed apart (EC2's prices), as is the output a job ships (${usd(PRICES.logsIngestionPerGb)} per GB into its log group, ${usd(PRICES.logsStoragePerGbMonth)} per GB-month kept).`,
    '',
    'A month with no job:',
    '',
    ...table(cost.idle, 'idle, a month'),
    '',
    'One job of one node that succeeds on its first attempt after an hour of `run` (submit, launch, boot, heartbeats, the two reports, the decision, the release, EC2\'s and Step Functions\' events):',
    '',
    ...table(cost.perJob, 'per job'),
    '',
    'Each further hour the job runs (its heartbeats):',
    '',
    ...table(cost.perRunHour, 'per hour of run'),
    '',
    `Nothing is billed at rest for the stack's ${cost.freeAtRest.join(', ')} (on-demand, per request), nor for its ${cost.logGroups} log groups beyond what they store (${usd(PRICES.logsStoragePerGbMonth)} per GB-month). Free tiers are left out.`,
    '',
    `The prices, us-east-1 (\`PRICES\` in bench/scale/limits.ts): Step Functions', Lambda's x86 and DynamoDB's read on ${PRICES.date}; CloudWatch's, X-Ray's and Lambda's Arm price on ${PRICES.observabilityDate}; the others are long-standing list prices, not read again.`,
    '',
    '| source | price |',
    '|---|---|',
    ...PRICES.sources.map((source) => {
      const split = source.indexOf(': ');
      return `| https://${source.slice(0, split)} | ${source.slice(split + 2)} |`;
    }),
    END_MARK,
  ].join('\n');
}

/** docs/aws.md with `block` in place of what lies between the marks. */
export function withCost(page: string, block: string): string {
  const begin = page.indexOf(BEGIN_MARK);
  const end = page.indexOf(END_MARK);
  if (begin < 0 || end < begin) throw new Error(`${COST_DOC} has no "${BEGIN_MARK}" ... "${END_MARK}" block`);
  return page.slice(0, begin) + block + page.slice(end + END_MARK.length);
}

/** The figures of the shipped app, rendered. */
export async function currentCost(): Promise<string> {
  const templates = synthesizedTemplates();
  return renderCost(stackCost(templates, await jobCounts(definitionOf(templates))));
}

async function main(): Promise<void> {
  const block = await currentCost();
  if (process.argv.includes('--write')) {
    writeFileSync(COST_DOC, withCost(readFileSync(COST_DOC, 'utf8'), block));
    process.stdout.write(`wrote ${COST_DOC}\n`);
  } else {
    process.stdout.write(`${block}\n`);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  process.env.CDK_VALIDATION ??= 'false';
  await main();
}
