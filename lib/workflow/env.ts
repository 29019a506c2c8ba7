// The Lambdas' configuration, shared by the CDK construct that sets it and the functions that read it.

import type { Ec2ComputeConfig } from '../adapters/ec2-compute.ts';

/** Every variable a relaunch Lambda may read; the CDK construct sets the ones each function needs. */
export const EnvVar = {
  tableName: 'TABLE_NAME',
  stateMachineArn: 'STATE_MACHINE_ARN',
  apiUrl: 'API_URL',
  /** JSON of the Ec2Compute settings (subnets, security group, instance profile, …). */
  computeConfig: 'COMPUTE_CONFIG',
} as const;
/** The name of one of those variables. */
export type EnvVar = (typeof EnvVar)[keyof typeof EnvVar];

/** A variable that must be set: a missing one names itself, so a misdeployed function says why. */
export function requireEnv(name: EnvVar, env: NodeJS.ProcessEnv = process.env): string {
  const value = env[name];
  if (value === undefined || value === '') {
    throw new Error(`environment variable ${name} is not set; the relaunch stack sets it on every function that needs it`);
  }
  return value;
}

/**
 * COMPUTE_CONFIG: Ec2Compute's configuration as the stack knows it at deploy time. The API
 * URL comes separately (API_URL): the API is created after the functions.
 */
export type ComputeEnvConfig = Omit<Ec2ComputeConfig, 'apiUrl'>;
