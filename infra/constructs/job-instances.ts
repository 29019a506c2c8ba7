// JobInstances: what a job's EC2 instances run as. The role lets the agent read its own
// instance's callback secret (and no other) and pull a task's image from the account's
// ECR (every repository, or those the deployment names), and an operator open a shell on
// a node (Session Manager); nothing else.

import { Aws, Validations } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';
import { SECRET_OWNER_TAG } from '../../lib/agent/secret-parameter.ts';
import { formatPortRange } from '../../lib/task-file/network-ports.ts';
import type { PortRange } from '../../lib/task-file/types.ts';
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
   * Let instances in the group reach each other (a multi-node job's rendezvous, and EFA,
   * which needs all traffic within its group). Nothing outside the group is ever admitted
   * either way.
   * @default true; false: no inbound rule at all
   */
  readonly nodeToNodeTraffic?: boolean;
  /**
   * TCP ports every job instance opens to `openPortsTo` (a task's `resources.ports` must
   * lie within them).
   * @default - none
   */
  readonly openPorts?: readonly PortRange[];
  /**
   * Where `openPorts` may be reached from: the VPC's CIDR, or a wider one the deployment chose.
   * @default - required when openPorts is given
   */
  readonly openPortsTo?: string;
  /**
   * The ECR repositories of the account a task's image may be pulled from (names, or
   * prefixes ending in `*`).
   * @default - every repository of the account
   */
  readonly ecrRepositories?: readonly string[];
}

/** The instance role and profile, and a security group that admits nothing from outside itself but the open ports. */
export class JobInstances extends Construct {
  readonly role: iam.Role;
  readonly instanceProfile: iam.InstanceProfile;
  readonly securityGroupId: string;
  /** The TCP ports the group opens (openPorts), for the launcher to check tasks against. */
  readonly openPorts: readonly PortRange[];

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
    // A task's Docker image may be in the account's ECR: the agent logs in and pulls, no more;
    // from every repository of the account unless the deployment names some.
    this.role.addToPolicy(new iam.PolicyStatement({ sid: 'EcrLogin', actions: ['ecr:GetAuthorizationToken'], resources: ['*'] }));
    this.role.addToPolicy(
      new iam.PolicyStatement({
        sid: 'PullFromAccountEcr',
        actions: ['ecr:BatchCheckLayerAvailability', 'ecr:GetDownloadUrlForLayer', 'ecr:BatchGetImage'],
        resources: (props.ecrRepositories ?? ['*']).map((name) => `arn:${Aws.PARTITION}:ecr:*:${Aws.ACCOUNT_ID}:repository/${name}`),
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
    if (props.nodeToNodeTraffic ?? true) {
      // Nodes of a multi-node job talk to each other (torchrun, NCCL): only members of this group.
      new ec2.CfnSecurityGroupIngress(this, 'NodeToNode', {
        groupId: group.attrGroupId,
        sourceSecurityGroupId: group.attrGroupId,
        ipProtocol: '-1',
        description: 'nodes of relaunch jobs, to each other',
      });
    }
    // Why a stack-level allow-list and not a security group per job: a group made at launch
    // must be deleted at release, which EC2 refuses while the terminated instances' network
    // interfaces linger (minutes), in every region, and it needs the VPC's CIDR looked up at
    // runtime with more EC2 permissions for the launcher. Here the ports are opened once,
    // to the VPC (or the CIDR the deployment names), and a task asking for others is refused
    // at launch (Ec2Compute); the price is that every job's nodes have them open, to that CIDR.
    const ports = props.openPorts ?? [];
    if (ports.length > 0 && props.openPortsTo === undefined) {
      throw new Error('JobInstances: openPorts needs openPortsTo, the CIDR (the VPC\'s, or wider) they are opened to');
    }
    this.openPorts = ports;
    for (const range of ports) {
      const ingress = new ec2.CfnSecurityGroupIngress(this, `Port${formatPortRange(range)}`, {
        groupId: group.attrGroupId,
        cidrIp: props.openPortsTo,
        ipProtocol: 'tcp',
        fromPort: range.from,
        toPort: range.to,
        description: `relaunch jobs' resources.ports ${formatPortRange(range)}`,
      });
      if (props.openPortsTo === '0.0.0.0/0') {
        Validations.of(ingress).acknowledge({
          id: 'AwsSolutions-EC23',
          reason: 'The deployment opened these job ports to every address on purpose (relaunch:jobPortsCidr); by default they are open to the VPC only.',
        });
      }
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
