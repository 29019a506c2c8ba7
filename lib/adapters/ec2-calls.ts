// What the EC2 providers share (Ec2Compute, Ec2Images, Ec2LaunchTemplates, Ec2Inventory): how
// an EC2 call is retried, which of EC2's errors mean "no capacity here" and which "try
// again", and the tags that mark a deployment's resources and an attempt's.

import { createHash } from 'node:crypto';
import type { Tag } from '@aws-sdk/client-ec2';
import { TagKey } from '../agent/tags.ts';
import type { LaunchRequest } from '../ports.ts';
import { DEPLOYMENT_TAG_KEY } from '../workflow/resources.ts';
import { awsErrorCode, isTransientAwsError, transientError } from './aws-errors.ts';

/** Errors that mean "no capacity here": try the next type, zone or region. */
export const CAPACITY_ERRORS: ReadonlySet<string> = new Set([
  'InsufficientInstanceCapacity',
  'InsufficientCapacity',
  'InsufficientHostCapacity',
  'InsufficientReservedInstanceCapacity',
  'InsufficientFreeAddressesInSubnet',
  'SpotMaxPriceTooLow',
  'MaxSpotInstanceCountExceeded',
  'InstanceLimitExceeded',
  'VcpuLimitExceeded',
  'Unsupported',
]);

/**
 * Errors that mean "slow down" or "EC2 failed this time": the same call is retried. With
 * any other 5xx (isTransientAwsError) but the capacity errors, which EC2 also answers
 * as server errors and which mean "try elsewhere", not "try again".
 */
const THROTTLING_ERRORS: ReadonlySet<string> = new Set([
  'RequestLimitExceeded',
  'Throttling',
  'ThrottlingException',
  'TooManyRequestsException',
  'RequestThrottled',
  'ServiceUnavailable',
  'Unavailable',
  'InternalError',
]);

/** Whether the same EC2 call may succeed later: throttling or EC2's own fault, never capacity. */
export function isTransientEc2Error(error: unknown): boolean {
  const code = awsErrorCode(error);
  if (CAPACITY_ERRORS.has(code) || code.startsWith('Insufficient')) return false;
  return THROTTLING_ERRORS.has(code) || isTransientAwsError(error);
}

/** Runs one AWS call for a provider, naming it (`EC2 CreateFleet in us-east-1`) if it fails for good. */
export type Ec2Retrying = <T>(what: string, call: () => Promise<T>) => Promise<T>;

/**
 * Runs a call, retrying it with exponential backoff (0.5 s, doubling, capped at 20 s) while
 * AWS throttles it or fails on its side; still failing after `retries` retries, it is a
 * TransientError naming the call. Ec2Compute makes one and hands it to the providers it
 * builds, so each of their calls is retried alike.
 */
export function ec2Retrying(retries: number, sleep: (ms: number) => Promise<void>): Ec2Retrying {
  return async (what, call) => {
    for (let retry = 0; ; retry += 1) {
      try {
        return await call();
      } catch (error) {
        if (!isTransientEc2Error(error)) throw error;
        if (retry >= retries) throw transientError(what, error, `the SDK's retries and ${retries} of relaunch's own`);
        await sleep(Math.min(500 * 2 ** retry, 20_000));
      }
    }
  };
}

/** States in which an instance still costs money or may come back. */
export const LIVE_STATES = ['pending', 'running', 'stopping', 'stopped'];

/** An EC2 Describe filter on one tag's value. */
export function tagFilter(key: string, value: string): { Name: string; Values: string[] } {
  return { Name: `tag:${key}`, Values: [value] };
}

/** The filters of a deployment's job resources: a job tag, and this deployment's tag. */
export function ownedFilters(deployment: string): { Name: string; Values: string[] }[] {
  return [{ Name: 'tag-key', Values: [TagKey.jobId] }, tagFilter(DEPLOYMENT_TAG_KEY, deployment)];
}

/** The tags every resource of an attempt carries: its name, job, attempt and deployment. */
export function attemptTags(namePrefix: string, request: Pick<LaunchRequest, 'jobId' | 'attempt'>): Tag[] {
  return [
    { Key: TagKey.name, Value: `${namePrefix}-${request.jobId}-${request.attempt}` },
    { Key: TagKey.jobId, Value: request.jobId },
    { Key: TagKey.attempt, Value: String(request.attempt) },
    { Key: DEPLOYMENT_TAG_KEY, Value: namePrefix },
  ];
}

/** EC2 caps a ClientToken at 64 ASCII characters. */
const CLIENT_TOKEN_MAX = 64;

/** A token of at most 64 printable ASCII characters: `plain` itself, or its SHA-256 when it does not fit. */
export function boundedToken(plain: string): string {
  if (plain.length <= CLIENT_TOKEN_MAX && /^[\x21-\x7e]*$/.test(plain)) return plain;
  return createHash('sha256').update(plain).digest('hex');
}
