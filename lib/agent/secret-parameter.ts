// Where an agent finds its attempt's callback secret: an SSM SecureString per instance,
// written by the launcher once the instance exists and read by the agent at boot. Never in
// user data, which every process that reaches instance metadata can read.
//
// Each parameter is named after its instance and tagged with the instance's ARN. The
// instance role may read a parameter under the path only when that tag equals
// `${ec2:SourceInstanceARN}`, the ARN of the instance whose credentials sign the request:
// a node reads its own secret and no other.

/** SSM's JSON protocol target for GetParameter, which the agent signs and sends. */
export const GET_PARAMETER_TARGET = 'AmazonSSM.GetParameter';

/** The tag on a secret parameter naming the one instance that may read it. */
export const SECRET_OWNER_TAG = 'relaunch:instance-arn';

/** The folder of every agent secret of a deployment (names are validated: letters, digits, -). */
export function agentSecretPath(namePrefix: string): string {
  return `/${namePrefix}/agent-secrets`;
}

/** The parameter holding the secret of the attempt instance `instanceId` runs. */
export function agentSecretName(path: string, instanceId: string): string {
  return `${path}/${instanceId}`;
}

/** The AWS partition a region belongs to. */
export function partitionOf(region: string): string {
  if (region.startsWith('cn-')) return 'aws-cn';
  if (region.startsWith('us-gov-')) return 'aws-us-gov';
  return 'aws';
}

/** An instance's ARN, as `ec2:SourceInstanceARN` gives it in a request the instance signs. */
export function instanceArn(region: string, account: string, instanceId: string): string {
  return `arn:${partitionOf(region)}:ec2:${region}:${account}:instance/${instanceId}`;
}

/** SSM's regional endpoint. */
export function ssmEndpoint(region: string): string {
  return `https://ssm.${region}.amazonaws.com${partitionOf(region) === 'aws-cn' ? '.cn' : ''}`;
}

/**
 * A node's parameter value: the callback secret, then one `NAME=<value, base64>` per job
 * secret, space-separated (no character in them needs escaping in SSM's JSON answer).
 */
export function agentSecretValue(callbackSecret: string, secrets: Readonly<Record<string, string>> = {}): string {
  const pairs = Object.entries(secrets).map(([name, value]) => `${name}=${Buffer.from(value, 'utf8').toString('base64')}`);
  return [callbackSecret, ...pairs].join(' ');
}

/** How an agent reaches its secret. */
export interface SecretSource {
  /** The folder of the parameters; the agent appends `/<its instance id>`. */
  readonly path: string;
  /** The region its requests are signed for. */
  readonly region: string;
  /** SSM's endpoint: ssmEndpoint(region) on EC2, the node's network locally. */
  readonly endpoint: string;
}
