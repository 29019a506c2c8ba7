// An AWS account in moto_server for relaunch check's tests: SDK clients pointed at moto, and
// a deployment set up the way a real one would be (VPC, subnets with their routes, the CDK
// bootstrap, spot's role, the stack and its Deployment output, an image, buckets), each
// piece one call a test can leave out or undo to make one check fail. The setup writes;
// check itself only reads, which each test asserts on what moto recorded.

import { CloudFormationClient, CreateStackCommand, DeleteStackCommand } from '@aws-sdk/client-cloudformation';
import {
  AllocateAddressCommand,
  AssociateRouteTableCommand,
  AttachInternetGatewayCommand,
  CreateInternetGatewayCommand,
  CreateNatGatewayCommand,
  CreateRouteCommand,
  CreateRouteTableCommand,
  CreateSubnetCommand,
  CreateVpcCommand,
  EC2Client,
  ModifySubnetAttributeCommand,
  RegisterImageCommand,
  RunInstancesCommand,
} from '@aws-sdk/client-ec2';
import { CreateRoleCommand, IAMClient } from '@aws-sdk/client-iam';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { ServiceQuotasClient } from '@aws-sdk/client-service-quotas';
import { PutParameterCommand, SSMClient } from '@aws-sdk/client-ssm';
import { STSClient } from '@aws-sdk/client-sts';
import type { CheckClients } from '../../../../lib/check/aws-account-reader.ts';
import { deploymentRecord, type DeploymentRecord } from '../../../../lib/check/deployment.ts';

/** Any credentials do for moto with authentication off. */
export const DUMMY_CREDENTIALS = { accessKeyId: 'AKIDCHECKTEST', secretAccessKey: 'check-test-secret' };

export interface Credentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
}

/**
 * Clients of every service check reads, at moto. Service Quotas is given apart: moto has
 * none of EC2's quotas (its Service Quotas knows only VPC's), so tests mock that client.
 */
export function motoClients(endpoint: string, home: string, options: { credentials?: Credentials; serviceQuotas?: (region: string) => ServiceQuotasClient } = {}): CheckClients {
  const config = (region: string) => ({ region, endpoint, credentials: options.credentials ?? DUMMY_CREDENTIALS, forcePathStyle: true, maxAttempts: 1 });
  const perRegion = <T>(make: (region: string) => T) => {
    const made = new Map<string, T>();
    return (region: string) => {
      const found = made.get(region) ?? make(region);
      made.set(region, found);
      return found;
    };
  };
  return {
    sts: new STSClient(config(home)),
    iam: new IAMClient(config(home)),
    s3: new S3Client(config(home)),
    cloudFormation: perRegion((region) => new CloudFormationClient(config(region))),
    ec2: perRegion((region) => new EC2Client(config(region))),
    ssm: perRegion((region) => new SSMClient(config(region))),
    serviceQuotas: options.serviceQuotas ?? perRegion((region) => new ServiceQuotasClient(config(region))),
  };
}

/** What a test's deployment is made of. */
export interface Deployment {
  readonly region: string;
  readonly vpcId: string;
  readonly subnetsByZone: Record<string, string>;
  /** The route table of each subnet (one each). */
  readonly routeTables: Record<string, string>;
  readonly natGatewayId: string;
  /** The public subnet the NAT gateway sits in, and its route table (0.0.0.0/0 to the internet gateway). */
  readonly natSubnetId: string;
  readonly natRouteTableId: string;
  readonly internetGatewayId: string;
  readonly imageId: string;
}

/** Writes into moto as the test's own setup (admin credentials where moto checks them). */
export class MotoAccount {
  readonly ec2: EC2Client;
  readonly ssm: SSMClient;
  readonly iam: IAMClient;
  readonly s3: S3Client;
  readonly cloudFormation: CloudFormationClient;

  constructor(
    readonly endpoint: string,
    readonly region: string,
    credentials: Credentials = DUMMY_CREDENTIALS,
  ) {
    const config = { region, endpoint, credentials, forcePathStyle: true };
    this.ec2 = new EC2Client(config);
    this.ssm = new SSMClient(config);
    this.iam = new IAMClient(config);
    this.s3 = new S3Client(config);
    this.cloudFormation = new CloudFormationClient(config);
  }

  /**
   * A VPC and one subnet per zone, each with its own route table; 0.0.0.0/0 of each goes
   * through `route`. The NAT gateway sits in a public subnet of its own (in the first zone),
   * whose table routes 0.0.0.0/0 to the internet gateway, as a real one must; `natConnectivity`
   * `private` makes a private NAT gateway instead.
   */
  async network(zones: readonly string[], route: 'nat' | 'igw' | 'none' = 'nat', options: { publicIps?: boolean; natConnectivity?: 'public' | 'private' } = {}): Promise<Deployment> {
    const vpc = await this.ec2.send(new CreateVpcCommand({ CidrBlock: '10.20.0.0/16' }));
    const vpcId = vpc.Vpc?.VpcId as string;
    const igw = await this.ec2.send(new CreateInternetGatewayCommand({}));
    const internetGatewayId = igw.InternetGateway?.InternetGatewayId as string;
    await this.ec2.send(new AttachInternetGatewayCommand({ InternetGatewayId: internetGatewayId, VpcId: vpcId }));
    const natSubnet = await this.ec2.send(new CreateSubnetCommand({ VpcId: vpcId, CidrBlock: '10.20.200.0/24', AvailabilityZone: zones[0] }));
    const natSubnetId = natSubnet.Subnet?.SubnetId as string;
    const natTable = await this.ec2.send(new CreateRouteTableCommand({ VpcId: vpcId }));
    const natRouteTableId = natTable.RouteTable?.RouteTableId as string;
    await this.ec2.send(new AssociateRouteTableCommand({ RouteTableId: natRouteTableId, SubnetId: natSubnetId }));
    await this.ec2.send(new CreateRouteCommand({ RouteTableId: natRouteTableId, DestinationCidrBlock: '0.0.0.0/0', GatewayId: internetGatewayId }));
    const connectivity = options.natConnectivity ?? 'public';
    const address = connectivity === 'public' ? await this.ec2.send(new AllocateAddressCommand({ Domain: 'vpc' })) : undefined;
    const nat = await this.ec2.send(new CreateNatGatewayCommand({ SubnetId: natSubnetId, ConnectivityType: connectivity, ...(address === undefined ? {} : { AllocationId: address.AllocationId }) }));
    const natGatewayId = nat.NatGateway?.NatGatewayId as string;
    const subnetsByZone: Record<string, string> = {};
    const routeTables: Record<string, string> = {};
    for (const [index, zone] of zones.entries()) {
      const subnet = await this.ec2.send(new CreateSubnetCommand({ VpcId: vpcId, CidrBlock: `10.20.${index}.0/24`, AvailabilityZone: zone }));
      const subnetId = subnet.Subnet?.SubnetId as string;
      subnetsByZone[zone] = subnetId;
      if (options.publicIps === true) {
        await this.ec2.send(new ModifySubnetAttributeCommand({ SubnetId: subnetId, MapPublicIpOnLaunch: { Value: true } }));
      }
      const table = await this.ec2.send(new CreateRouteTableCommand({ VpcId: vpcId }));
      const routeTableId = table.RouteTable?.RouteTableId as string;
      routeTables[zone] = routeTableId;
      await this.ec2.send(new AssociateRouteTableCommand({ RouteTableId: routeTableId, SubnetId: subnetId }));
      if (route === 'nat') await this.ec2.send(new CreateRouteCommand({ RouteTableId: routeTableId, DestinationCidrBlock: '0.0.0.0/0', NatGatewayId: natGatewayId }));
      if (route === 'igw') await this.ec2.send(new CreateRouteCommand({ RouteTableId: routeTableId, DestinationCidrBlock: '0.0.0.0/0', GatewayId: internetGatewayId }));
    }
    const image = await this.ec2.send(
      new RegisterImageCommand({ Name: `check-${Date.now()}`, Architecture: 'x86_64', RootDeviceName: '/dev/sda1', BlockDeviceMappings: [{ DeviceName: '/dev/sda1', Ebs: { VolumeSize: 8 } }] }),
    );
    return { region: this.region, vpcId, subnetsByZone, routeTables, natGatewayId, natSubnetId, natRouteTableId, internetGatewayId, imageId: image.ImageId as string };
  }

  /** What `cdk bootstrap` leaves that check reads: its version parameter. */
  async bootstrap(version = 28): Promise<void> {
    await this.ssm.send(new PutParameterCommand({ Name: '/cdk-bootstrap/hnb659fds/version', Value: String(version), Type: 'String', Overwrite: true }));
  }

  /**
   * Spot's service-linked role, as IAM names it. (moto's CreateServiceLinkedRole names it
   * `AWSServiceRoleForspot`, so the role is made as IAM would.)
   */
  async spotRole(): Promise<void> {
    await this.iam.send(
      new CreateRoleCommand({
        RoleName: 'AWSServiceRoleForEC2Spot',
        Path: '/aws-service-role/spot.amazonaws.com/',
        AssumeRolePolicyDocument: JSON.stringify({ Version: '2012-10-17', Statement: [{ Effect: 'Allow', Principal: { Service: 'spot.amazonaws.com' }, Action: 'sts:AssumeRole' }] }),
      }),
    );
  }

  /** The stack, with the Deployment output relaunch's synth writes (its key hashed as the CDK hashes it). */
  async stack(name: string, record: DeploymentRecord | null, extraOutputs: Record<string, string> = {}): Promise<void> {
    const outputs: Record<string, { Value: string }> = Object.fromEntries(Object.entries(extraOutputs).map(([key, value]) => [key, { Value: value }]));
    if (record !== null) outputs.RelaunchDeployment4B3A2C1D = { Value: JSON.stringify(record) };
    await this.cloudFormation.send(
      new CreateStackCommand({ StackName: name, TemplateBody: JSON.stringify({ Resources: { Marker: { Type: 'AWS::CloudFormation::WaitConditionHandle' } }, Outputs: outputs }) }),
    );
  }

  async deleteStack(name: string): Promise<void> {
    await this.cloudFormation.send(new DeleteStackCommand({ StackName: name }));
  }

  async bucket(name: string, region = this.region): Promise<void> {
    const client = region === this.region ? this.s3 : new S3Client({ region, endpoint: this.endpoint, credentials: DUMMY_CREDENTIALS, forcePathStyle: true });
    await client.send(new CreateBucketCommand({ Bucket: name, ...(region === 'us-east-1' ? {} : { CreateBucketConfiguration: { LocationConstraint: region as 'eu-west-1' } }) }));
  }

  /** Instances running now, counted against the quotas. */
  async run(instanceType: string, count: number, market: 'spot' | 'on-demand', subnetId: string, imageId: string): Promise<void> {
    await this.ec2.send(
      new RunInstancesCommand({
        ImageId: imageId,
        InstanceType: instanceType as 'g5.xlarge',
        MinCount: count,
        MaxCount: count,
        SubnetId: subnetId,
        ...(market === 'spot' ? { InstanceMarketOptions: { MarketType: 'spot' } } : {}),
      }),
    );
  }
}

/** The record a stack of this relaunch outputs for a deployment. */
export function recordOf(deployment: Deployment, overrides: Partial<DeploymentRecord> = {}): DeploymentRecord {
  return {
    ...deploymentRecord({
      namePrefix: 'relaunch',
      vpcId: deployment.vpcId,
      subnetsByZone: deployment.subnetsByZone,
      apiUrl: `https://abc123.execute-api.${deployment.region}.amazonaws.com/v1/`,
      dataBucket: 'relaunch-stack-data',
      dataBuckets: ['team-data', 'ckpt-*'],
    }),
    ...overrides,
  };
}
