// TakeDown: what `cdk destroy` runs before it deletes what a job's instances hold. A custom
// resource, backed by the take-down function, that CloudFormation deletes after every
// function that could launch an instance (they depend on it) and before the instances'
// security group and role (it depends on them): its deletion terminates every instance
// of the deployment and ends every live job, so no paid instance outlives the stack.

import { CustomResource } from 'aws-cdk-lib';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import { Construct, type IDependable } from 'constructs';

/** The custom resource's type, as CloudFormation lists it. */
export const TAKE_DOWN_RESOURCE_TYPE = 'Custom::RelaunchTakeDown';

/** What the take-down runs, and what must go before and after it. */
export interface TakeDownProps {
  /** The take-down function (functions/take-down): CloudFormation invokes it on every request. */
  readonly handler: lambda.IFunction;
  /**
   * Deleted before the take-down runs (each depends on it): the functions that launch or
   * could lead to a launch, with their roles and policies, so that none launches once the
   * take-down has looked.
   */
  readonly deletedBefore: readonly Construct[];
  /**
   * Deleted after it (it depends on them): what live instances hold, which AWS would not
   * delete while they run (their security group).
   */
  readonly deletedAfter: readonly IDependable[];
}

/** The take-down's custom resource, ordered between the launchers and the instances' resources. */
export class TakeDown extends Construct {
  readonly resource: CustomResource;

  constructor(scope: Construct, id: string, props: TakeDownProps) {
    super(scope, id);
    this.resource = new CustomResource(this, 'Resource', { serviceToken: props.handler.functionArn, resourceType: TAKE_DOWN_RESOURCE_TYPE });
    for (const construct of props.deletedBefore) construct.node.addDependency(this.resource);
    for (const dependable of props.deletedAfter) this.resource.node.addDependency(dependable);
  }
}
