// `relaunch check`, the use case: reads the account through an AccountReader (read-only)
// and turns what it finds into checks, each ok, warn or fail, plus, with a task, the
// verdict on its candidates. A read these credentials may not make is a warning naming
// the permission; nothing here throws for what the account holds.

import { awsErrorCode } from '../adapters/aws-errors.ts';
import { aliasParameter, DEFAULT_IMAGE_PARAMETERS, imageKind } from '../adapters/ec2-images.ts';
import { bucketAllowed, notAllowedBucket } from '../adapters/s3-data.ts';
import { candidatesOf, type Candidate } from '../candidates.ts';
import { architectureOf, hasGpus, INSTANCE_TYPES, instanceTypeInfo } from '../instance-types.ts';
import type { Market } from '../policy/types.ts';
import { namedBuckets } from '../task-file/mounts.ts';
import { regionOfZone } from '../task-file/cloud-region-zone.ts';
import type { TaskSpec } from '../task-file/types.ts';
import {
  compareVersions,
  findDeploymentOutput,
  parseDeploymentRecord,
  RELAUNCH_VERSION,
  settingsOfRecord,
  type DeploymentRecord,
  type DeploymentSettings,
} from './deployment.ts';
import { subnetCheck, type RouteTableFacts, type SubnetFacts, type VpcEndpointFacts } from './network.ts';
import { PermissionDeniedError, type AccountReader, type ApiProbe, type BucketFacts, type CallerIdentity, type StackFacts } from './account-reader-port.ts';
import { quotaCheck, quotaGroupOf, vcpusInUse, type AllowedInGroup, type InstanceInUse, type QuotaGroup, type QuotaUse } from './quotas.ts';
import { needsAwsCheck, taskChecks } from './offline.ts';
import { reportOf, type CheckReport, type CheckResult, type Verdict } from './report.ts';
import { judgeCandidate, launchCheck, type ImageOutcome, type JudgedCandidate, type Known, type RegionFacts } from './verdict.ts';
import { DEFAULT_NAME_PREFIX, forwarderStackName } from '../deployment-names.ts';

/** The settings cdk.json gives, for before the first deploy. */
export type LocalSettings =
  | { readonly kind: 'settings'; readonly source: string; readonly settings: DeploymentSettings; readonly placeholder: boolean }
  | { readonly kind: 'absent'; readonly source: string }
  | { readonly kind: 'invalid'; readonly source: string; readonly message: string };

/** What the command was asked. */
export interface CheckInput {
  readonly region: string;
  /** Where the region came from, for the report: `--region`, `AWS_REGION`, ... */
  readonly regionSource: string;
  readonly stackName: string;
  /** The API the user named (`--api`, RELAUNCH_API_URL); else the stack's own is used. */
  readonly apiUrl: { readonly url: string; readonly source: string } | null;
  readonly local: LocalSettings;
  /** A task file's tasks (several for a pipeline); null without one. */
  readonly task: { readonly specs: readonly TaskSpec[]; readonly pipeline: boolean } | null;
}

/** What the use case reads through. */
export interface CheckDeps {
  readonly reader: AccountReader;
  readonly api: ApiProbe;
}

/** The CDK's default synthesizer refuses to deploy into a region bootstrapped below this version. */
export const MIN_BOOTSTRAP_VERSION = 6;

/** The service-linked role EC2 uses for spot instances; without it a spot launch may be refused (AWS asks API callers to create it first). */
export const SPOT_ROLE = 'AWSServiceRoleForEC2Spot';

/** A read that could not be made: why, and the IAM action when it was a refused permission. */
type Unread = { readonly known: false; readonly why: string; readonly action?: string };

/** Runs a read, as a fact or why it could not be made. */
async function read<T>(call: () => Promise<T>): Promise<{ readonly known: true; readonly value: T } | Unread> {
  try {
    return { known: true, value: await call() };
  } catch (error) {
    if (error instanceof PermissionDeniedError) return { known: false, why: `these credentials may not call ${error.action}`, action: error.action };
    return { known: false, why: describeError(error) };
  }
}

/**
 * Why STS would not say who the caller is: no credentials found, credentials AWS refuses,
 * or STS not reached at all (the network). Each has its own fix.
 */
function credentialsFailure(error: unknown): CheckResult {
  const why = describeError(error);
  const status = (error as { $metadata?: { httpStatusCode?: unknown } } | null)?.$metadata?.httpStatusCode;
  const configure = 'configure credentials (aws configure, aws sso login, or AWS_PROFILE), then aws sts get-caller-identity';
  if (awsErrorCode(error) === 'CredentialsProviderError') return { id: 'credentials', status: 'fail', message: `no AWS credentials found: ${why}`, fix: configure };
  if (typeof status === 'number') return { id: 'credentials', status: 'fail', message: `AWS refused these credentials: ${why}`, fix: configure };
  return { id: 'credentials', status: 'fail', message: `AWS STS could not be reached: ${why}`, fix: 'check the network (and AWS_ENDPOINT_URL, if set), then aws sts get-caller-identity' };
}

/** An unexpected error in one line: AWS's code and HTTP status when there are, and the first line of its message. */
function describeError(error: unknown): string {
  const code = awsErrorCode(error);
  const status = (error as { $metadata?: { httpStatusCode?: unknown } } | null)?.$metadata?.httpStatusCode;
  const message = (error instanceof Error ? error.message : String(error)).split('\n')[0]?.trim() ?? '';
  const label = [code, typeof status === 'number' ? `HTTP ${status}` : ''].filter((part) => part !== '').join(', ');
  if (label === '') return message;
  return message === '' || message === code ? label : `${label}: ${message}`;
}

/** The warning for a check that could not be made; it names the permission that was refused. */
function notChecked(id: string, what: string, unread: Unread, identity: string): CheckResult {
  return {
    id,
    status: 'warn',
    message: `${what}: not checked: ${unread.why}`,
    ...(unread.action === undefined ? {} : { fix: `allow ${unread.action} to ${identity} (read-only)` }),
  };
}

/** Memoizes reads by key: account checks and candidates share quotas, offerings and images. */
class Reads {
  readonly #cache = new Map<string, Promise<unknown>>();

  get<T>(key: string, call: () => Promise<T>): Promise<T> {
    let found = this.#cache.get(key) as Promise<T> | undefined;
    if (found === undefined) {
      found = call();
      this.#cache.set(key, found);
    }
    return found;
  }
}

/**
 * Checks the account, the region, the deployment and (with a task) whether it would
 * launch now. The report's checks come in a fixed order: region, credentials, stack,
 * version, settings, bootstrap per region, api, the failover regions' forwarders, spot
 * role, quotas, the VPC and subnets, then the task's buckets and launch. When the account
 * cannot be read: region, credentials, settings (cdk.json's), the task's fit
 * (lib/check/offline.ts), and `offline`, naming what was not checked.
 */
export async function runChecks(input: CheckInput, deps: CheckDeps): Promise<CheckReport> {
  const { reader } = deps;
  const region = await regionCheck(reader, input);
  const checks: CheckResult[] = [region];
  // A region that does not exist has no endpoint: every later call would fail as if the network did.
  if (region.status === 'fail') return reportOf(checks);
  let identity: CallerIdentity;
  try {
    identity = await reader.identity();
  } catch (error) {
    // The account cannot be read; what cdk.json and the task file say still can.
    const failure = credentialsFailure(error);
    checks.push(failure);
    const settings = settingsCheck(input, null, checks);
    if (input.task !== null) checks.push(...taskChecks(input.task.specs, input.task.pipeline, settings?.settings ?? null));
    checks.push(needsAwsCheck(failure.message.split(':')[0] ?? failure.message));
    return reportOf(checks);
  }
  const caller = identity.arn;
  checks.push({ id: 'credentials', status: 'ok', message: `${caller} in account ${identity.account}` });

  const stack = await read(() => reader.stack(input.region, input.stackName));
  const record = stackChecks(input, stack, caller, checks);
  const settings = settingsCheck(input, record, checks);
  const reads = new Reads();
  // A failover region that does not exist is said once; nothing else is read there.
  const missing = new Set<string>();
  for (const { region } of settings?.settings.regions ?? []) {
    if (region === input.region) continue;
    const named = await failoverRegionCheck(reader, region);
    if (named !== null) {
      checks.push(named);
      missing.add(region);
    }
  }
  const regions = (settings?.settings.regions.map(({ region }) => region) ?? [input.region]).filter((region) => !missing.has(region));
  for (const region of regions) checks.push(await bootstrapCheck(reader, region, identity.account, caller));
  const api = await apiCheck(input, record, deps.api, caller);
  if (api !== null) checks.push(api);
  // Failover regions need their EC2 event forwarder, deployed with the stack (cdk deploy --all).
  if (record !== null) for (const { region } of record.otherRegions) if (!missing.has(region)) checks.push(await forwarderCheck(reader, input.stackName, region, caller));

  const candidates = input.task === null ? null : input.task.specs.map((spec) => candidatesOf(spec, 'resources').candidates);
  checks.push(await spotRoleCheck(reader, candidates, caller));
  const allowed = settings?.settings.allowedInstanceTypes ?? null;
  for (const region of regions) checks.push(...(await quotaChecks(reader, reads, region, allowed, caller)));
  if (settings !== null && settings.usable) {
    for (const region of settings.settings.regions.filter(({ region: name }) => !missing.has(name))) checks.push(...(await subnetChecks(reader, region.region, region.subnetsByZone, region === settings.settings.regions[0] ? settings.settings.vpcId : null, caller)));
  }
  if (input.task === null || candidates === null) return reportOf(checks);

  const bucketResults = await bucketChecks(reader, input.task.specs, settings?.settings ?? null, caller);
  checks.push(...bucketResults);
  const deployment: DeploymentSettings = settings?.settings ?? { namePrefix: DEFAULT_NAME_PREFIX, vpcId: '', regions: [{ region: input.region, subnetsByZone: {} }], allowedInstanceTypes: null, dataBuckets: [], dataBucket: null };
  const vcpus = await candidateVcpus(reader, input.region, candidates.flat());
  const judged: JudgedCandidate[][] = [];
  for (const [index, spec] of input.task.specs.entries()) {
    const forTask = candidates[index] ?? [];
    const facts = new Map<string, RegionFacts>();
    for (const region of deployment.regions) facts.set(region.region, await readRegionFacts(reader, reads, region.region, Object.keys(region.subnetsByZone), spec, forTask));
    const task = input.task.pipeline ? index : undefined;
    judged.push(
      forTask.map((candidate) =>
        judgeCandidate({
          candidate,
          ...(task === undefined ? {} : { task }),
          nodes: spec.numNodes,
          vcpus: candidate.vcpus ?? vcpus.get(candidate.instanceType) ?? null,
          allowedInstanceTypes: allowed,
          regions: deployment.regions,
          facts: (region) => facts.get(region) ?? UNREAD_REGION,
        }),
      ),
    );
  }
  judged.forEach((forTask, index) => checks.push(launchCheck(input.task?.pipeline === true ? `launch:task-${index + 1}` : 'launch', forTask)));
  const verdict: Verdict = {
    launchable: judged.every((forTask) => forTask.some(({ verdict }) => verdict.launchable === true)) && bucketResults.every((check) => check.status !== 'fail'),
    candidates: judged.flat().map(({ verdict }) => verdict),
  };
  return reportOf(checks, verdict);
}

/**
 * The region: one that exists and the account has enabled. Asked before anything else (of
 * the partition's first region): a name like us-east-9 has no endpoints, and without this
 * every later read would fail as a network fault. A region that could not be asked about
 * (no credentials yet, the network) is taken as given: the credentials check says why.
 */
async function regionCheck(reader: AccountReader, input: CheckInput): Promise<CheckResult> {
  const named = `${input.region} (from ${input.regionSource})`;
  const problem = await regionProblem(reader, input.region, 'region', named, {
    notEnabled: `aws account enable-region --region-name ${input.region}, or name another region with --region or AWS_REGION`,
    missing: `name a region that exists (aws ec2 describe-regions --all-regions --query 'Regions[].RegionName') with --region or AWS_REGION`,
  });
  return problem ?? { id: 'region', status: 'ok', message: named };
}

/** A failover region (relaunch:otherRegions) that does not exist or is not enabled; null when it is fine or could not be asked about. */
function failoverRegionCheck(reader: AccountReader, region: string): Promise<CheckResult | null> {
  return regionProblem(reader, region, `region:${region}`, `${region}, a failover region (relaunch:otherRegions)`, {
    notEnabled: `aws account enable-region --region-name ${region}, or remove it from relaunch:otherRegions and redeploy`,
    missing: "remove it from relaunch:otherRegions or name a region that exists (aws ec2 describe-regions --all-regions --query 'Regions[].RegionName'), and redeploy (npx cdk deploy)",
  });
}

/** What to do about a region, by what is wrong with it: the fix differs by where it was named. */
interface RegionFixes {
  /** The account has not enabled it (an opt-in region). */
  readonly notEnabled: string;
  /** No region has that name. */
  readonly missing: string;
}

/**
 * What is wrong with `region`, as check `id` saying `named`: the account has not enabled it,
 * or no region has that name (with the regions of its family that exist); null when it is
 * enabled or could not be asked about.
 */
async function regionProblem(reader: AccountReader, region: string, id: string, named: string, fixes: RegionFixes): Promise<CheckResult | null> {
  const status = await read(() => reader.regionStatus(region));
  if (!status.known || status.value.kind === 'enabled') return null;
  if (status.value.kind === 'not-enabled') {
    return { id, status: 'fail', message: `${named}: this account has not enabled the region (an opt-in region)`, fix: fixes.notEnabled };
  }
  const family = region.replace(/-?\d*$/, '');
  const near = status.value.regions.filter((name) => name.startsWith(`${family}-`));
  return {
    id,
    status: 'fail',
    message: `${named}: no AWS region of that name${near.length === 0 ? '' : ` (${family}: ${near.join(', ')})`}`,
    fix: fixes.missing,
  };
}

/** The stack and its version; returns the deployment record when the stack has one this CLI reads. */
function stackChecks(input: CheckInput, stack: Known<StackFacts | null> & { action?: string }, caller: string, checks: CheckResult[]): DeploymentRecord | null {
  const name = input.stackName;
  const where = `in ${input.region}`;
  if (!stack.known) {
    checks.push(notChecked('stack', `stack ${name} ${where}`, stack, caller));
    return null;
  }
  if (stack.value === null) {
    checks.push({ id: 'stack', status: 'warn', message: `stack ${name} is not deployed ${where} yet`, fix: 'npx cdk deploy (with your -c relaunch:... settings), from the relaunch checkout' });
    return null;
  }
  checks.push(stackStatusCheck(name, input.region, stack.value));
  const value = findDeploymentOutput(stack.value.outputs);
  if (value === null) {
    checks.push({ id: 'version', status: 'fail', message: `stack ${name} records no version: it was deployed by a relaunch older than this CLI (${RELAUNCH_VERSION})`, fix: 'npx cdk deploy, from this checkout' });
    return null;
  }
  let record: DeploymentRecord;
  try {
    record = parseDeploymentRecord(value);
  } catch (error) {
    checks.push({ id: 'version', status: 'fail', message: `stack ${name}'s Deployment output is not one this CLI (${RELAUNCH_VERSION}) reads: ${(error as Error).message}`, fix: 'npx cdk deploy from this checkout, or use the relaunch that deployed it' });
    return null;
  }
  const order = compareVersions(record.version, RELAUNCH_VERSION);
  if (order < 0) checks.push({ id: 'version', status: 'fail', message: `stack ${name} is relaunch ${record.version}, older than this CLI (${RELAUNCH_VERSION})`, fix: 'npx cdk deploy, from this checkout' });
  else if (order > 0) checks.push({ id: 'version', status: 'warn', message: `stack ${name} is relaunch ${record.version}, newer than this CLI (${RELAUNCH_VERSION})`, fix: 'update this checkout (git pull && npm ci)' });
  else checks.push({ id: 'version', status: 'ok', message: `stack ${name} and this CLI are both relaunch ${RELAUNCH_VERSION}` });
  return record;
}

/** CloudFormation's stack status, as something that stops relaunch or not. */
function stackStatusCheck(name: string, region: string, stack: StackFacts): CheckResult {
  const status = stack.status;
  const reason = stack.statusReason === null ? '' : ` (${stack.statusReason})`;
  const events = `aws cloudformation describe-stack-events --region ${region} --stack-name ${name}`;
  if (status === 'ROLLBACK_COMPLETE' || status === 'ROLLBACK_IN_PROGRESS') {
    return { id: 'stack', status: 'fail', message: `stack ${name} is ${status}: its first deploy failed${reason}`, fix: `see why (${events}), delete it (aws cloudformation delete-stack --region ${region} --stack-name ${name}) and deploy again` };
  }
  if (status.endsWith('_FAILED')) return { id: 'stack', status: 'fail', message: `stack ${name} is ${status}${reason}`, fix: `see why: ${events}` };
  if (status.endsWith('_IN_PROGRESS')) return { id: 'stack', status: 'warn', message: `stack ${name} is ${status}: a change is under way`, fix: 'check again once it ends' };
  if (status === 'UPDATE_ROLLBACK_COMPLETE') return { id: 'stack', status: 'warn', message: `stack ${name}: its last update was rolled back${reason}; it runs what was deployed before`, fix: `see why: ${events}` };
  return { id: 'stack', status: 'ok', message: `stack ${name} is ${status} in ${region}` };
}

/** The settings to judge against, and the check saying where they came from. */
function settingsCheck(input: CheckInput, record: DeploymentRecord | null, checks: CheckResult[]): { settings: DeploymentSettings; usable: boolean } | null {
  const { local } = input;
  if (record !== null) {
    const settings = settingsOfRecord(record, input.region);
    const drift = local.kind === 'settings' && !local.placeholder && differ(local.settings, settings);
    checks.push(
      drift
        ? { id: 'settings', status: 'warn', message: `read from stack ${input.stackName}; ${local.source} says otherwise (subnets, regions, allowed types or buckets): it is not deployed yet`, fix: 'npx cdk deploy, to deploy what cdk.json says' }
        : { id: 'settings', status: 'ok', message: `read from stack ${input.stackName}` },
    );
    return { settings, usable: true };
  }
  if (local.kind === 'absent') {
    checks.push({ id: 'settings', status: 'warn', message: `no deployed stack to read settings from, and no ${local.source}: subnets are not checked, quotas are checked for relaunch's own instance types`, fix: 'run relaunch check in the relaunch checkout, where cdk.json is' });
    return null;
  }
  if (local.kind === 'invalid') {
    checks.push({ id: 'settings', status: 'fail', message: `${local.source}: ${local.message}`, fix: `correct ${local.source}'s context (or the -c values you deploy with)` });
    return null;
  }
  const home = Object.keys(local.settings.regions[0]?.subnetsByZone ?? {}).map(regionOfZone)[0];
  if (local.placeholder) {
    checks.push({ id: 'settings', status: 'fail', message: `${local.source} still holds the example ids: a deploy would fail`, fix: 'set relaunch:vpcId and relaunch:subnets to your VPC and subnets (cdk.json, or -c relaunch:vpcId=vpc-… -c relaunch:subnets=us-east-1a=subnet-…)' });
    return { settings: local.settings, usable: false };
  }
  if (home !== undefined && home !== input.region) {
    checks.push({ id: 'settings', status: 'fail', message: `${local.source}'s subnets are in ${home}, but the stack would deploy to ${input.region} (from ${input.regionSource})`, fix: `deploy and check with the region of the subnets: AWS_REGION=${home} (or --region ${home})` });
    return { settings: local.settings, usable: true };
  }
  checks.push({ id: 'settings', status: 'ok', message: `read from ${local.source} (no deployed stack yet)` });
  return { settings: local.settings, usable: true };
}

function differ(a: DeploymentSettings, b: DeploymentSettings): boolean {
  const shape = (s: DeploymentSettings) => JSON.stringify([s.vpcId, s.regions.map((r) => [r.region, r.subnetsByZone]), s.allowedInstanceTypes, [...s.dataBuckets].sort()]);
  return shape(a) !== shape(b);
}

async function bootstrapCheck(reader: AccountReader, region: string, account: string, caller: string): Promise<CheckResult> {
  const id = `bootstrap:${region}`;
  const fix = `npx cdk bootstrap aws://${account}/${region}`;
  const version = await read(() => reader.bootstrapVersion(region));
  if (!version.known) return notChecked(id, `CDK bootstrap of ${region}`, version, caller);
  if (version.value === null) return { id, status: 'fail', message: `${region} is not bootstrapped for the CDK: cdk deploy would fail`, fix };
  if (!Number.isFinite(version.value)) return { id, status: 'warn', message: `${region}'s CDK bootstrap version is not a number` , fix };
  if (version.value < MIN_BOOTSTRAP_VERSION) {
    return { id, status: 'fail', message: `${region} is bootstrapped at version ${version.value}; deploying needs ${MIN_BOOTSTRAP_VERSION} or later`, fix };
  }
  return { id, status: 'ok', message: `${region} is bootstrapped for the CDK (version ${version.value})` };
}

/** Whether the API answers, signed as the caller: `GET /sources`, which every deployed relaunch API serves. */
async function apiCheck(input: CheckInput, record: DeploymentRecord | null, probe: ApiProbe, caller: string): Promise<CheckResult | null> {
  const url = input.apiUrl?.url ?? record?.apiUrl ?? null;
  if (url === null) return null;
  const named = input.apiUrl === null ? `the stack's API ${url}` : `${url} (${input.apiUrl.source})`;
  const trim = (text: string) => text.replace(/\/+$/, '');
  if (input.apiUrl !== null && record !== null && trim(input.apiUrl.url) !== trim(record.apiUrl)) {
    return { id: 'api', status: 'warn', message: `${named} is not stack ${input.stackName}'s API (${record.apiUrl})`, fix: `export RELAUNCH_API_URL=${record.apiUrl}` };
  }
  const answer = await probe.sources(url);
  if (answer.status === 200) return { id: 'api', status: 'ok', message: `${named} answers` };
  if (answer.status === 403) {
    return {
      id: 'api',
      status: 'warn',
      message: `${named} refused ${caller} (403): relaunch run and status would be refused too`,
      fix: `allow execute-api:Invoke on this API to ${caller}`,
    };
  }
  if (answer.status === 0) return { id: 'api', status: 'fail', message: `${named} does not answer: ${answer.failure ?? 'no answer'}`, fix: 'check the URL (the stack\'s Deployment output holds it) and the network' };
  const error = (answer.body as { error?: unknown; message?: unknown } | null) ?? {};
  const given = typeof error.error === 'string' ? error.error : typeof error.message === 'string' ? error.message : 'no message';
  // Whatever answered may not be relaunch's: its words are cut short.
  const said = given.length > 200 ? `${given.slice(0, 200)}…` : given;
  return { id: 'api', status: 'fail', message: `${named} answered ${answer.status} to GET /sources (${said}): it is not a relaunch API this CLI can use`, fix: 'npx cdk deploy from this checkout, and use the ApiUrl it prints' };
}

/** The stack that forwards a failover region's EC2 events home (infra/event-forwarder-stack.ts, named `<stack>-events-<region>`). */
async function forwarderCheck(reader: AccountReader, stackName: string, region: string, caller: string): Promise<CheckResult> {
  const id = `forwarder:${region}`;
  const name = forwarderStackName(stackName, region);
  const stack = await read(() => reader.stack(region, name));
  if (!stack.known) return notChecked(id, `stack ${name} in ${region}`, stack, caller);
  if (stack.value === null) {
    return { id, status: 'warn', message: `stack ${name} is not deployed in ${region}: a preemption there is noticed only when heartbeats stop`, fix: 'npx cdk deploy --all (with the same -c settings)' };
  }
  const status = stackStatusCheck(name, region, stack.value);
  return { ...status, id };
}

async function spotRoleCheck(reader: AccountReader, candidates: readonly (readonly Candidate[])[] | null, caller: string): Promise<CheckResult> {
  const id = 'spot-role';
  const exists = await read(() => reader.roleExists(SPOT_ROLE));
  if (!exists.known) return notChecked(id, `spot's service-linked role ${SPOT_ROLE}`, exists, caller);
  if (exists.value) return { id, status: 'ok', message: `${SPOT_ROLE} exists: spot launches may go ahead` };
  const spot = candidates === null || candidates.flat().some((candidate) => candidate.market === 'spot');
  const fix = 'aws iam create-service-linked-role --aws-service-name spot.amazonaws.com';
  if (!spot) return { id, status: 'warn', message: `${SPOT_ROLE} does not exist: this task launches on-demand only, but any spot launch would be refused`, fix };
  return {
    id,
    status: 'fail',
    message: `${SPOT_ROLE} does not exist: AWS asks API callers to create it before their first spot request (relaunch's launch function is allowed to, but EC2 is not documented to do it for them)`,
    fix,
  };
}

/** The instances in use in a region, read once. */
function inUse(reader: AccountReader, reads: Reads, region: string): Promise<Known<InstanceInUse[]> & { action?: string }> {
  return reads.get(`in-use:${region}`, () => read(() => reader.instancesInUse(region)));
}

/** A quota's value and its use in a region, read once per code. */
async function quotaUse(reader: AccountReader, reads: Reads, region: string, group: QuotaGroup, market: Market): Promise<Known<QuotaUse> & { action?: string }> {
  const code = group.codes[market];
  return reads.get(`quota:${region}:${code}`, async () => {
    const limit = await read(() => reader.quota(region, code));
    if (!limit.known) return limit;
    const instances = await inUse(reader, reads, region);
    if (!instances.known) return instances;
    return { known: true, value: { limit: limit.value, used: vcpusInUse(instances.value, group, market).vcpus } };
  });
}

/** The quota of each group (on-demand and spot) the allowed types fall in, in one region. */
async function quotaChecks(reader: AccountReader, reads: Reads, region: string, allowedTypes: readonly string[] | null, caller: string): Promise<CheckResult[]> {
  const explicit = allowedTypes !== null;
  const types = allowedTypes ?? INSTANCE_TYPES.map((type) => type.name);
  const unknownSize = types.filter((type) => instanceTypeInfo(type) === null);
  const described = unknownSize.length === 0 ? { known: true as const, value: new Map<string, number>() as ReadonlyMap<string, number> } : await read(() => reader.vcpusOf(region, unknownSize));
  const groups = new Map<string, AllowedInGroup & { types: { instanceType: string; vcpus: number }[] }>();
  const outside: string[] = [];
  for (const instanceType of types) {
    const group = quotaGroupOf(instanceType);
    if (group === null) {
      outside.push(instanceType);
      continue;
    }
    const vcpus = instanceTypeInfo(instanceType)?.vcpus ?? (described.known ? described.value.get(instanceType) : undefined);
    const entry = groups.get(group.id) ?? { group, types: [], explicit };
    if (vcpus !== undefined) entry.types.push({ instanceType, vcpus });
    groups.set(group.id, entry);
  }
  const results: CheckResult[] = [];
  for (const entry of groups.values()) {
    entry.types.sort((a, b) => a.vcpus - b.vcpus);
    for (const market of ['on-demand', 'spot'] as const) {
      const use = await quotaUse(reader, reads, region, entry.group, market);
      const id = `quota:${region}:${entry.group.id}:${market}`;
      results.push(use.known ? quotaCheck(region, market, entry, use.value) : notChecked(id, `${entry.group.name} ${market} vCPU quota (${entry.group.codes[market]}) in ${region}`, use, caller));
    }
  }
  if (outside.length > 0) {
    results.push({ id: `quota:${region}:other`, status: 'warn', message: `${outside.join(', ')}: relaunch does not know which vCPU quota limits these families; see Service Quotas for EC2 in ${region}` });
  }
  return results;
}

/**
 * Each configured subnet of a region: it exists where it should and reaches the API and
 * CloudWatch Logs. The stack's VPC (home region) is checked first: once it is gone, the
 * subnet checks' fixes no longer point at it.
 */
async function subnetChecks(reader: AccountReader, region: string, subnetsByZone: Readonly<Record<string, string>>, stackVpc: string | null, caller: string): Promise<CheckResult[]> {
  const results: CheckResult[] = [];
  let vpcId = stackVpc;
  if (stackVpc !== null) {
    const existing = await read(() => reader.vpcs(region, [stackVpc]));
    if (!existing.known) results.push(notChecked('vpc', `the stack's VPC ${stackVpc}`, existing, caller));
    else if (!existing.value.includes(stackVpc)) {
      vpcId = null;
      results.push({
        id: 'vpc',
        status: 'fail',
        message: `the stack's VPC ${stackVpc} no longer exists in ${region}: instances have nowhere to launch`,
        fix: `choose a VPC that exists (aws ec2 describe-vpcs --region ${region}), set relaunch:vpcId to it and relaunch:subnets to its subnets (aws ec2 describe-subnets --region ${region} --filters Name=vpc-id,Values=vpc-…), and redeploy (npx cdk deploy)`,
      });
    } else results.push({ id: 'vpc', status: 'ok', message: `the stack's VPC ${stackVpc} exists in ${region}` });
  }
  const zones = Object.entries(subnetsByZone);
  const subnets = await read(() => reader.subnets(region, zones.map(([, subnet]) => subnet)));
  if (!subnets.known) return [...results, ...zones.map(([zone, subnet]) => notChecked(`subnet:${zone}`, `${subnet} (${zone})`, subnets, caller))];
  const vpcs = [...new Set(subnets.value.map((subnet) => subnet.vpcId))];
  const tables = await read(() => reader.routeTables(region, vpcs));
  const endpoints = await read(() => reader.vpcEndpoints(region, vpcs));
  // Without them a NAT route is taken on trust, as before they were read.
  const gateways = await read(() => reader.natGateways(region, vpcs));
  return [...results, ...zones.map(([zone, subnetId]): CheckResult => {
    const found: SubnetFacts | null = subnets.value.find((subnet) => subnet.subnetId === subnetId) ?? null;
    const want = { region, zone, subnetId, vpcId };
    // Existence is known; the route needs the tables, and the endpoints can block it.
    if (found !== null && !tables.known) return notChecked(`subnet:${zone}`, `the route of ${subnetId} (${zone})`, tables, caller);
    if (found !== null && !endpoints.known) return notChecked(`subnet:${zone}`, `the VPC endpoints of ${subnetId} (${zone})`, endpoints, caller);
    const routeTables: RouteTableFacts[] = tables.known ? tables.value : [];
    const vpcEndpoints: VpcEndpointFacts[] = endpoints.known ? endpoints.value : [];
    return subnetCheck(want, found, routeTables, vpcEndpoints, gateways.known ? gateways.value : null);
  })];
}

/** What a task's named buckets need: allowed by the deployment, and there (or creatable). */
async function bucketChecks(reader: AccountReader, specs: readonly TaskSpec[], settings: DeploymentSettings | null, caller: string): Promise<CheckResult[]> {
  const buckets = new Map<string, { field: string; created: boolean }>();
  for (const spec of specs) {
    for (const { field, bucket, mount } of namedBuckets(spec)) {
      const created = mount.source.kind === 'bucket';
      const known = buckets.get(bucket);
      buckets.set(bucket, { field: known?.field ?? field, created: (known?.created ?? false) || created });
    }
  }
  const results: CheckResult[] = [];
  for (const [bucket, { field, created }] of buckets) {
    const id = `bucket:${bucket}`;
    if (settings !== null) {
      const data = { bucket: settings.dataBucket ?? '', allowedBuckets: settings.dataBuckets };
      if (!bucketAllowed(bucket, data)) {
        results.push({ id, status: 'fail', message: `${field}: ${notAllowedBucket(bucket, data)}`, fix: `npx cdk deploy -c relaunch:dataBuckets=${[...settings.dataBuckets, bucket].join(',')}` });
        continue;
      }
    }
    const facts = await read(() => reader.bucket(bucket));
    results.push(facts.known ? bucketCheck(id, bucket, field, created, facts.value, settings?.regions[0]?.region ?? null) : notChecked(id, `${field}: bucket ${bucket}`, facts, caller));
  }
  return results;
}

function bucketCheck(id: string, bucket: string, field: string, created: boolean, facts: BucketFacts, home: string | null): CheckResult {
  if (facts.kind === 'missing') {
    if (created) return { id, status: 'ok', message: `${field}: ${bucket} does not exist yet; relaunch run creates it` };
    return { id, status: 'fail', message: `${field}: no bucket ${bucket}: the job could not copy from it`, fix: `create it or name an existing bucket (aws s3api head-bucket --bucket ${bucket})` };
  }
  if (facts.kind === 'forbidden') {
    if (created) return { id, status: 'fail', message: `${field}: ${bucket} exists and refuses this account (403): relaunch run refuses to mount it`, fix: 'name a bucket of this account, or one that lets it list (s3:ListBucket)' };
    return { id, status: 'warn', message: `${field}: ${bucket} refuses these credentials (403, s3:ListBucket): jobs reach it with the stack's data-access role, which its owner must allow` };
  }
  if (created && home !== null && facts.region !== null && facts.region !== home) {
    return { id, status: 'fail', message: `${field}: ${bucket} is in ${facts.region}, not the stack's region ${home}: relaunch run refuses to mount it`, fix: `name a bucket in ${home}` };
  }
  return { id, status: 'ok', message: `${field}: ${bucket} is reachable${facts.region === null ? '' : ` (${facts.region})`}` };
}

/** vCPUs of candidate types relaunch's catalog does not describe, from EC2 in the home region. */
async function candidateVcpus(reader: AccountReader, region: string, candidates: readonly Candidate[]): Promise<ReadonlyMap<string, number>> {
  const unknown = [...new Set(candidates.filter((candidate) => candidate.vcpus === null).map((candidate) => candidate.instanceType))];
  if (unknown.length === 0) return new Map();
  const described = await read(() => reader.vcpusOf(region, unknown));
  return described.known ? described.value : new Map();
}

/** Facts of a region that was not read (the judge asks only of the deployment's regions). */
const UNREAD_REGION: RegionFacts = {
  offerings: { known: false, why: 'not read' },
  quota: () => ({ known: false, why: 'not read' }),
  image: () => ({ known: false, why: 'not read' }),
};

/**
 * A region's facts for one task's candidates: which configured zones offer each type,
 * the quotas of their groups and markets, the image each type boots. Quotas are read
 * once for the whole run; offerings and images once per region and task.
 */
async function readRegionFacts(reader: AccountReader, reads: Reads, region: string, zones: readonly string[], spec: TaskSpec, candidates: readonly Candidate[]): Promise<RegionFacts> {
  const types = [...new Set(candidates.map((candidate) => candidate.instanceType))];
  const offerings = await read(() => reader.offerings(region, types, zones));
  const quotas = new Map<string, Known<QuotaUse>>();
  for (const candidate of candidates) {
    const group = quotaGroupOf(candidate.instanceType);
    if (group === null) continue;
    quotas.set(group.codes[candidate.market], await quotaUse(reader, reads, region, group, candidate.market));
  }
  const images = new Map<string, Known<ImageOutcome>>();
  for (const type of types) {
    const key = `image:${region}:${JSON.stringify(spec.resources.imageId)}:${architectureOf(type)}:${hasGpus(type)}`;
    images.set(type, await reads.get(key, () => read(() => imageOutcome(reader, region, spec, type))));
  }
  return {
    offerings,
    quota: (code) => quotas.get(code) ?? { known: false, why: 'not read' },
    image: (type) => images.get(type) ?? { known: false, why: 'not read' },
  };
}

/** The image a type boots in a region, as the launch would pick it (lib/adapters/ec2-images.ts). */
async function imageOutcome(reader: AccountReader, region: string, spec: TaskSpec, instanceType: string): Promise<ImageOutcome> {
  const wanted = spec.resources.imageId;
  const arch = architectureOf(instanceType);
  let imageId: string;
  if (wanted === null || wanted.kind === 'alias') {
    const kind = imageKind(instanceType);
    const parameter = wanted === null ? DEFAULT_IMAGE_PARAMETERS[kind] : aliasParameter(wanted.alias, arch);
    const value = await reader.parameter(region, parameter);
    const what = wanted === null ? `the default ${kind} image` : `image_id skypilot:${wanted.alias}`;
    if (value === null) return { problem: `${what}: the public parameter ${parameter} is not in ${region}` };
    imageId = value;
  } else if (wanted.kind === 'ami') {
    imageId = wanted.imageId;
  } else {
    const given = wanted.byRegion[region];
    if (given === undefined) return { problem: `resources.image_id names no AMI for ${region}` };
    imageId = given;
  }
  const image = await reader.image(region, imageId);
  if (image === null) return { problem: `resources.image_id: ${imageId} is not an AMI this account can use in ${region}` };
  if (image.state !== 'available') return { problem: `resources.image_id: ${imageId} is ${image.state} in ${region}` };
  if (image.architecture !== null && image.architecture !== arch) return { problem: `resources.image_id: ${imageId} is ${image.architecture}; ${instanceType} needs ${arch}` };
  return { imageId };
}
