// The names of a deployment's CloudFormation stacks, from its name prefix: the CDK app
// (infra/app.ts) gives them and `relaunch check` looks for them, so two deployments in one
// account and region are two stacks, never one stack updated by turns.

/** The name prefix of a deployment that sets none (`relaunch:namePrefix`). */
export const DEFAULT_NAME_PREFIX = 'relaunch';

/** The stack of the default deployment: the name it has always had, so an update of it stays in place. */
export const DEFAULT_STACK_NAME = 'Relaunch';

/**
 * The stack of the deployment named `namePrefix`: `Relaunch` for the default one, else
 * `<namePrefix>-relaunch`. No prefix gives another's stack, nor another's forwarder stack
 * (those end with a region).
 */
export function stackNameOf(namePrefix: string = DEFAULT_NAME_PREFIX): string {
  return namePrefix === DEFAULT_NAME_PREFIX ? DEFAULT_STACK_NAME : `${namePrefix}-relaunch`;
}

/** The stack forwarding `region`'s EC2 events to the deployment whose stack is `stackName`. */
export function forwarderStackName(stackName: string, region: string): string {
  return `${stackName}-events-${region}`;
}
