// JobInstances: what a job's EC2 instances run as. The role lets the agent read its own
// instance's callback secret (and no other) and pull a task's image from the account's
// ECR, and an operator open a shell on a node (Session Manager); nothing else.

import { Aws } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';
import { SECRET_OWNER_TAG } from '../../lib/agent/secret-parameter.ts';
import { agentSecretArns, type LaunchScope } from '../permissions.ts';

/** Where job instances live. */
export interface JobInstancesProps {
  /** The VPC the instances launch in (its id, from config: no lookup). */
  readonly vpcId: string;
  /**
   * Managed policies to attach to the instance role, for tasks that need AWS access
   * themselves (e.g. reading S3).
   * @default - none: the agent needs no AWS permissions
   */
  readonly managedPolicies?: readonly iam.IManagedPolicy[];
  /**
   * Let instances in the group reach each other (a multi-node job's rendezvous). Nothing
   * outside the group is ever admitted either way.
   * @default false: no inbound rule at all
   */
  readonly nodeToNodeTraffic?: boolean;
}

/** The instance role and profile, and a security group that admits nothing from outside itself. */
export class JobInstances extends Construct {
  readonly role: iam.Role;
  readonly instanceProfile: iam.InstanceProfile;
  readonly securityGroupId: string;

  constructor(scope: Construct, id: string, props: JobInstancesProps) {
    super(scope, id);
    this.role = new iam.Role(this, 'Role', {
      assumedBy: new iam.ServicePrincipal('ec2.amazonaws.com'),
      description: 'relaunch job instances: each reads its own callback secret; Session Manager',
      managedPolicies: [...(props.managedPolicies ?? [])],
    });
    // What Session Manager needs on the instance, and no more. Not AmazonSSMManagedInstanceCore:
    // it also lets every process on the node read any SSM parameter of the account.
    this.role.addToPolicy(
      new iam.PolicyStatement({
        sid: 'SessionManagerShell',
        actions: [
          'ssm:UpdateInstanceInformation',
          'ssmmessages:CreateControlChannel',
          'ssmmessages:CreateDataChannel',
          'ssmmessages:OpenControlChannel',
          'ssmmessages:OpenDataChannel',
        ],
        // These actions take no resource narrower than `*`.
        resources: ['*'],
      }),
    );
    // A task's Docker image may be in the account's ECR: the agent logs in and pulls, no more.
    this.role.addToPolicy(new iam.PolicyStatement({ sid: 'EcrLogin', actions: ['ecr:GetAuthorizationToken'], resources: ['*'] }));
    this.role.addToPolicy(
      new iam.PolicyStatement({
        sid: 'PullFromAccountEcr',
        actions: ['ecr:BatchCheckLayerAvailability', 'ecr:GetDownloadUrlForLayer', 'ecr:BatchGetImage'],
        resources: [`arn:${Aws.PARTITION}:ecr:*:${Aws.ACCOUNT_ID}:repository/*`],
      }),
    );
    this.instanceProfile = new iam.InstanceProfile(this, 'Profile', { role: this.role });
    // L1 on purpose: the L2 wants an IVpc, and building one from an id alone needs zones we do not know offline.
    const group = new ec2.CfnSecurityGroup(this, 'SecurityGroup', {
      vpcId: props.vpcId,
      groupDescription: 'relaunch job instances: no inbound from outside; outbound for the API and packages',
      securityGroupEgress: [{ ipProtocol: '-1', cidrIp: '0.0.0.0/0', description: 'the API, package mirrors, data' }],
    });
    this.securityGroupId = group.attrGroupId;
    if (props.nodeToNodeTraffic ?? false) {
      // Nodes of a multi-node job talk to each other (torchrun, NCCL): only members of this group.
      new ec2.CfnSecurityGroupIngress(this, 'NodeToNode', {
        groupId: group.attrGroupId,
        sourceSecurityGroupId: group.attrGroupId,
        ipProtocol: '-1',
        description: 'nodes of relaunch jobs, to each other',
      });
    }
  }

  /**
   * Lets each instance read the secret parameter tagged with its own ARN: the tag must
   * equal `ec2:SourceInstanceARN`, which IAM sets from the instance whose role
   * credentials sign the request. A parameter not yet written has no tag, so it is
   * refused the same way (the agent tries again).
   */
  allowReadingOwnSecret(scope: Pick<LaunchScope, 'regions' | 'agentSecretPath'>): void {
    this.role.addToPolicy(
      new iam.PolicyStatement({
        sid: 'ReadOwnAgentSecret',
        actions: ['ssm:GetParameter'],
        resources: agentSecretArns(scope),
        conditions: { StringEquals: { [`ssm:resourceTag/${SECRET_OWNER_TAG}`]: '${ec2:SourceInstanceARN}' } },
      }),
    );
  }
}
