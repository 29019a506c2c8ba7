// What `relaunch check` runs with: the region (and where it came from), cdk.json's
// settings for before the first deploy, the SDK clients (the default credential chain;
// AWS_ENDPOINT_URL points them elsewhere) and the signed probe of the deployed API.

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import { EC2Client } from '@aws-sdk/client-ec2';
import { IAMClient } from '@aws-sdk/client-iam';
import { S3Client } from '@aws-sdk/client-s3';
import { ServiceQuotasClient } from '@aws-sdk/client-service-quotas';
import { SSMClient } from '@aws-sdk/client-ssm';
import { STSClient } from '@aws-sdk/client-sts';
import { configFromContext, isExampleNetwork } from '../infra/config.ts';
import type { CheckClients } from '../lib/check/aws-account-reader.ts';
import type { DeploymentSettings } from '../lib/check/deployment.ts';
import type { ApiAnswer, ApiProbe } from '../lib/check/account-reader-port.ts';
import type { LocalSettings } from '../lib/check/run-checks.ts';
import { DEFAULT_NAME_PREFIX, stackNameOf } from '../lib/deployment-names.ts';
import { InvalidInputError } from '../lib/errors.ts';
import { isAwsZone, regionOfZone } from '../lib/task-file/cloud-region-zone.ts';
import { isLoopback } from './context.ts';
import { ApiError, HttpJobsClient } from './jobs-client.ts';

/** An AWS region's name, as `--region` takes it. */
const REGION = /^[a-z]{2}(-[a-z]+)+-\d$/;

/** A CloudFormation stack name. */
const STACK_NAME = /^[A-Za-z][A-Za-z0-9-]{0,127}$/;

/** The region, checked, and where it came from. */
export interface ResolvedRegion {
  readonly region: string;
  readonly source: string;
}

/**
 * `--stack`, checked; when not given, the stack `cdk deploy` of relaunch's app names from
 * cdk.json's prefix (infra/app.ts), or the default deployment's.
 */
export function stackName(given: string | undefined, local: LocalSettings): string {
  const name = given ?? stackNameOf(local.kind === 'settings' ? local.settings.namePrefix : DEFAULT_NAME_PREFIX);
  if (!STACK_NAME.test(name)) throw new InvalidInputError([{ path: '--stack', message: `expected a CloudFormation stack name (a letter, then letters, digits or -, at most 128), got "${name}"` }]);
  return name;
}

/** The region of an API Gateway URL (`https://<id>.execute-api.<region>.amazonaws.com/...`), or null. */
export function regionOfApi(url: string): string | null {
  return /\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$/.exec(new URL(url).hostname)?.[1] ?? null;
}

/**
 * The region to check, first found of: `--region`; the API URL's; the SDK's own
 * (AWS_REGION, or the profile's region); the region of cdk.json's subnets.
 *
 * @throws InvalidInputError naming `--region` for a bad value, or when none is found.
 */
export async function resolveRegion(given: string | undefined, apiUrl: string | null, local: LocalSettings): Promise<ResolvedRegion> {
  if (given !== undefined) {
    if (!REGION.test(given)) throw new InvalidInputError([{ path: '--region', message: `expected a region like us-east-1, got "${given}"` }]);
    return { region: given, source: '--region' };
  }
  const ofApi = apiUrl === null ? null : regionOfApi(apiUrl);
  if (ofApi !== null) return { region: ofApi, source: 'the API URL' };
  const sdk = await sdkRegion();
  if (sdk !== null) return sdk;
  const zone = local.kind === 'settings' ? Object.keys(local.settings.regions[0]?.subnetsByZone ?? {})[0] : undefined;
  if (zone !== undefined) return { region: regionOfZone(zone), source: `${local.source}'s subnets` };
  throw new InvalidInputError([{ path: '--region', message: 'expected a region: give --region, set AWS_REGION, or give your AWS profile a region' }]);
}

/** The region the SDK would use on its own, or null when none is configured. */
async function sdkRegion(): Promise<ResolvedRegion | null> {
  const sts = new STSClient({});
  try {
    const region = await sts.config.region();
    if (!REGION.test(region)) throw new InvalidInputError([{ path: '--region', message: `expected a region like us-east-1 from AWS_REGION or the profile, got "${region}"` }]);
    return { region, source: process.env.AWS_REGION !== undefined && process.env.AWS_REGION !== '' ? 'AWS_REGION' : 'the AWS profile' };
  } catch (error) {
    if (error instanceof InvalidInputError) throw error;
    return null;
  } finally {
    sts.destroy();
  }
}

/**
 * The settings of `cdk.json` in `folder` (its `context`, as `cdk deploy` reads it when no
 * -c is given): absent when there is no cdk.json, invalid with the reason when its
 * context is not a relaunch configuration.
 */
export async function localSettings(folder: string): Promise<LocalSettings> {
  const source = 'cdk.json';
  let text: string;
  try {
    text = await readFile(join(folder, source), 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'absent', source };
    return { kind: 'invalid', source, message: `cannot be read: ${(error as Error).message}` };
  }
  let context: Record<string, unknown>;
  try {
    const parsed = JSON.parse(text) as { context?: unknown };
    context = typeof parsed.context === 'object' && parsed.context !== null ? (parsed.context as Record<string, unknown>) : {};
  } catch (error) {
    return { kind: 'invalid', source, message: `is not JSON: ${(error as Error).message}` };
  }
  try {
    const config = configFromContext((key) => context[key]);
    const zones = Object.keys(config.subnetsByZone);
    const home = zones.find(isAwsZone);
    const settings: DeploymentSettings = {
      namePrefix: config.namePrefix ?? DEFAULT_NAME_PREFIX,
      vpcId: config.vpcId,
      regions: [
        { region: home === undefined ? '' : regionOfZone(home), subnetsByZone: config.subnetsByZone },
        ...(config.otherRegions ?? []).map(({ region, subnetsByZone }) => ({ region, subnetsByZone })),
      ],
      allowedInstanceTypes: config.allowedInstanceTypes ?? null,
      dataBuckets: config.dataBuckets ?? [],
      dataBucket: null,
    };
    return { kind: 'settings', source, settings, placeholder: isExampleNetwork(config) };
  } catch (error) {
    return { kind: 'invalid', source, message: (error as Error).message.replace(/\n\s*/g, ' ') };
  }
}

/** How long a connection to AWS may take to open, and an answer to come, before the call fails. */
const CONNECT_TIMEOUT_MS = 5_000;
const REQUEST_TIMEOUT_MS = 30_000;

/** Clients with the default credential chain: one of each global service, regional ones made once per region. */
export function defaultClients(home: string): CheckClients & { destroy(): void } {
  const made: { destroy(): void }[] = [];
  const keep = <T extends { destroy(): void }>(client: T): T => (made.push(client), client);
  const perRegion = <T extends { destroy(): void }>(make: (region: string) => T) => {
    const byRegion = new Map<string, T>();
    return (region: string): T => {
      const found = byRegion.get(region) ?? keep(make(region));
      byRegion.set(region, found);
      return found;
    };
  };
  // A network that swallows packets would otherwise hold every call (and check) forever;
  // without throwOnRequestTimeout the SDK only warns when the answer is late.
  const config = (region: string) => ({ region, requestHandler: { connectionTimeout: CONNECT_TIMEOUT_MS, requestTimeout: REQUEST_TIMEOUT_MS, throwOnRequestTimeout: true } });
  return {
    sts: keep(new STSClient(config(home))),
    iam: keep(new IAMClient(config(home))),
    s3: keep(new S3Client(config(home))),
    cloudFormation: perRegion((region) => new CloudFormationClient(config(region))),
    ec2: perRegion((region) => new EC2Client(config(region))),
    ssm: perRegion((region) => new SSMClient(config(region))),
    serviceQuotas: perRegion((region) => new ServiceQuotasClient(config(region))),
    destroy: () => made.forEach((client) => client.destroy()),
  };
}

/** `GET /sources` of a deployed API, SigV4-signed with the caller's credentials (unsigned on 127.0.0.1), tried once. */
export const httpApiProbe: ApiProbe = {
  async sources(apiUrl: string): Promise<ApiAnswer> {
    const client = new HttpJobsClient(apiUrl, { sign: !isLoopback(apiUrl), pacing: { pollMinMs: 0, pollMaxMs: 0, tries: 1 } });
    try {
      return await client.relay('GET', '/sources');
    } catch (error) {
      // Nothing answered (ApiError 0), or the request could not be made (signing without credentials).
      if (error instanceof ApiError && error.statusCode !== 0) throw error;
      const message = error instanceof Error ? error.message : String(error);
      return { status: 0, body: null, failure: message.replace(/^cannot reach \S+: /, '') };
    }
  },
};
