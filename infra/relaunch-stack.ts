// RelaunchStack: the deployable stack, env-agnostic (no account or region baked in, no lookups).

import { Stack, type StackProps } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { Relaunch, type RelaunchProps } from './relaunch.ts';

/** The stack's props: a stack's, plus relaunch's. */
export interface RelaunchStackProps extends StackProps {
  readonly relaunch: RelaunchProps;
}

/** One Relaunch in its own stack. */
export class RelaunchStack extends Stack {
  readonly relaunch: Relaunch;

  constructor(scope: Construct, id: string, props: RelaunchStackProps) {
    super(scope, id, { description: 'relaunch: batch jobs on EC2 that come back by themselves', ...props });
    this.relaunch = new Relaunch(this, 'Relaunch', props.relaunch);
  }
}
