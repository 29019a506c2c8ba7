// AwsAccountReader: the reads of `relaunch check` over the AWS SDK, with the clients it is
// given (per region where the service is regional). It only describes, gets, lists and
// heads; an AWS answer that means "not there" becomes null, and a refused permission a
// PermissionDeniedError naming the IAM action.

import { DescribeStacksCommand, type CloudFormationClient } from '@aws-sdk/client-cloudformation';
import {
  DescribeImagesCommand,
  DescribeRegionsCommand,
  DescribeSubnetsCommand,
  DescribeVpcsCommand,
  paginateDescribeInstances,
  paginateDescribeInstanceTypeOfferings,
  paginateDescribeInstanceTypes,
  paginateDescribeNatGateways,
  paginateDescribeRouteTables,
  paginateDescribeVpcEndpoints,
  type EC2Client,
  type Route,
} from '@aws-sdk/client-ec2';
import { GetRoleCommand, type IAMClient } from '@aws-sdk/client-iam';
import { HeadBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import { GetAWSDefaultServiceQuotaCommand, GetServiceQuotaCommand, type ServiceQuotasClient } from '@aws-sdk/client-service-quotas';
import { GetParameterCommand, type SSMClient } from '@aws-sdk/client-ssm';
import { GetCallerIdentityCommand, type STSClient } from '@aws-sdk/client-sts';
import { awsErrorCode } from '../adapters/aws-errors.ts';
import { instanceTypeInfo } from '../instance-types.ts';
import type { NatGatewayFacts, RouteFacts, RouteTableFacts, RouteTargetKind, SubnetFacts, VpcEndpointFacts } from './network.ts';
import { marketOfLifecycle, PermissionDeniedError, type AccountReader, type BucketFacts, type CallerIdentity, type ImageFacts, type RegionStatus, type StackFacts } from './account-reader-port.ts';
import type { InstanceInUse } from './quotas.ts';

/** The clients the reader uses; regional services come per region. Nothing here builds one. */
export interface CheckClients {
  readonly sts: STSClient;
  readonly iam: IAMClient;
  /** In the home region: HeadBucket says where a bucket is. */
  readonly s3: S3Client;
  cloudFormation(region: string): CloudFormationClient;
  ec2(region: string): EC2Client;
  ssm(region: string): SSMClient;
  serviceQuotas(region: string): ServiceQuotasClient;
}

/**
 * Codes AWS answers a refused permission with, by service: IAM-style `AccessDenied`,
 * JSON services' `AccessDeniedException`, EC2's `UnauthorizedOperation`, older query
 * services' `AuthorizationError`.
 */
const DENIED_CODES: ReadonlySet<string> = new Set(['AccessDenied', 'AccessDeniedException', 'UnauthorizedOperation', 'AuthorizationError', 'Forbidden']);

/** 403s that are about the credentials themselves, not a permission. */
const CREDENTIAL_CODES: ReadonlySet<string> = new Set([
  'InvalidClientTokenId',
  'SignatureDoesNotMatch',
  'ExpiredToken',
  'ExpiredTokenException',
  'UnrecognizedClientException',
  'InvalidAccessKeyId',
  'AuthFailure',
]);

function httpStatus(error: unknown): number | undefined {
  const status = (error as { $metadata?: { httpStatusCode?: unknown } } | null)?.$metadata?.httpStatusCode;
  return typeof status === 'number' ? status : undefined;
}

/** Whether an SDK error is a refused permission (a 403 whose body even the SDK could not read counts). */
export function isPermissionDenied(error: unknown): boolean {
  const code = awsErrorCode(error);
  if (DENIED_CODES.has(code)) return true;
  return httpStatus(error) === 403 && !CREDENTIAL_CODES.has(code);
}

/** The EC2 describe calls take at most this many filter values at once. */
const FILTER_VALUES = 200;

function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let start = 0; start < items.length; start += size) out.push(items.slice(start, start + size));
  return out;
}

/** The kind of target a route's fields name. */
function targetOf(route: Route): { kind: RouteTargetKind; id: string } {
  const gateway = route.GatewayId ?? '';
  if (gateway === 'local') return { kind: 'local', id: 'local' };
  if (gateway.startsWith('igw-')) return { kind: 'internet-gateway', id: gateway };
  if (gateway.startsWith('vgw-')) return { kind: 'virtual-private-gateway', id: gateway };
  if (route.NatGatewayId !== undefined) return { kind: 'nat-gateway', id: route.NatGatewayId };
  if (route.TransitGatewayId !== undefined) return { kind: 'transit-gateway', id: route.TransitGatewayId };
  if (route.VpcPeeringConnectionId !== undefined) return { kind: 'peering', id: route.VpcPeeringConnectionId };
  if (route.InstanceId !== undefined) return { kind: 'instance', id: route.InstanceId };
  if (route.NetworkInterfaceId !== undefined) return { kind: 'network-interface', id: route.NetworkInterfaceId };
  return { kind: 'other', id: gateway || route.EgressOnlyInternetGatewayId || route.CarrierGatewayId || route.LocalGatewayId || 'unknown' };
}

function routeFacts(route: Route): RouteFacts {
  const target = targetOf(route);
  return {
    destination: route.DestinationCidrBlock ?? route.DestinationPrefixListId ?? route.DestinationIpv6CidrBlock ?? '',
    targetKind: target.kind,
    targetId: target.id,
    state: route.State ?? 'active',
  };
}

/**
 * The region of a partition that always exists, where DescribeRegions is asked about any
 * other: a region that does not exist has no endpoint to ask (its name does not resolve).
 */
export function partitionHome(region: string): string {
  if (region.startsWith('cn-')) return 'cn-north-1';
  if (region.startsWith('us-gov-')) return 'us-gov-west-1';
  return 'us-east-1';
}

/** AccountReader over the AWS SDK. */
export class AwsAccountReader implements AccountReader {
  readonly #clients: CheckClients;

  constructor(clients: CheckClients) {
    this.#clients = clients;
  }

  async regionStatus(region: string): Promise<RegionStatus> {
    const home = partitionHome(region);
    const answer = await this.#call('ec2:DescribeRegions', home, () => this.#clients.ec2(home).send(new DescribeRegionsCommand({ AllRegions: true })));
    const regions = (answer.Regions ?? []).flatMap((found) => (found.RegionName === undefined ? [] : [{ name: found.RegionName, optIn: found.OptInStatus ?? '' }]));
    const found = regions.find((candidate) => candidate.name === region);
    if (found === undefined) return { kind: 'none', regions: regions.map(({ name }) => name).sort() };
    return found.optIn === 'not-opted-in' ? { kind: 'not-enabled' } : { kind: 'enabled' };
  }

  async identity(): Promise<CallerIdentity> {
    const answer = await this.#clients.sts.send(new GetCallerIdentityCommand({}));
    return { account: answer.Account ?? '', arn: answer.Arn ?? '' };
  }

  async bootstrapVersion(region: string): Promise<number | null> {
    const value = await this.parameter(region, '/cdk-bootstrap/hnb659fds/version');
    return value === null ? null : Number(value);
  }

  async stack(region: string, name: string): Promise<StackFacts | null> {
    try {
      const answer = await this.#call('cloudformation:DescribeStacks', region, () => this.#clients.cloudFormation(region).send(new DescribeStacksCommand({ StackName: name })));
      const stack = answer.Stacks?.[0];
      if (stack === undefined) return null;
      return {
        name: stack.StackName ?? name,
        status: stack.StackStatus ?? 'UNKNOWN',
        statusReason: stack.StackStatusReason ?? null,
        outputs: (stack.Outputs ?? []).map((output) => ({ key: output.OutputKey ?? '', value: output.OutputValue ?? '' })),
      };
    } catch (error) {
      // CloudFormation answers a stack it does not have with a ValidationError, not a 404.
      if (awsErrorCode(error) === 'ValidationError' && /does not exist/.test((error as Error).message)) return null;
      throw error;
    }
  }

  async roleExists(name: string): Promise<boolean> {
    try {
      await this.#call('iam:GetRole', 'global', () => this.#clients.iam.send(new GetRoleCommand({ RoleName: name })));
      return true;
    } catch (error) {
      if (awsErrorCode(error) === 'NoSuchEntity' || awsErrorCode(error) === 'NoSuchEntityException') return false;
      throw error;
    }
  }

  /**
   * GetServiceQuota answers the applied value; for a quota never changed it may have none
   * (NoSuchResourceException), and AWS's default is the value then.
   */
  async quota(region: string, code: string): Promise<number | null> {
    const client = this.#clients.serviceQuotas(region);
    try {
      const applied = await this.#call('servicequotas:GetServiceQuota', region, () => client.send(new GetServiceQuotaCommand({ ServiceCode: 'ec2', QuotaCode: code })));
      return applied.Quota?.Value ?? null;
    } catch (error) {
      if (awsErrorCode(error) !== 'NoSuchResourceException') throw error;
    }
    try {
      const standard = await this.#call('servicequotas:GetAWSDefaultServiceQuota', region, () =>
        client.send(new GetAWSDefaultServiceQuotaCommand({ ServiceCode: 'ec2', QuotaCode: code })),
      );
      return standard.Quota?.Value ?? null;
    } catch (error) {
      if (awsErrorCode(error) === 'NoSuchResourceException') return null;
      throw error;
    }
  }

  async instancesInUse(region: string): Promise<InstanceInUse[]> {
    const found: { instanceType: string; lifecycle: string | undefined; vcpus: number | null }[] = [];
    const pages = paginateDescribeInstances({ client: this.#clients.ec2(region) }, { Filters: [{ Name: 'instance-state-name', Values: ['pending', 'running'] }] });
    for (const page of await this.#pages('ec2:DescribeInstances', region, pages)) {
      for (const reservation of page.Reservations ?? []) {
        for (const instance of reservation.Instances ?? []) {
          const cores = instance.CpuOptions?.CoreCount;
          const threads = instance.CpuOptions?.ThreadsPerCore;
          found.push({
            instanceType: instance.InstanceType ?? 'unknown',
            lifecycle: instance.InstanceLifecycle,
            vcpus: cores !== undefined && threads !== undefined ? cores * threads : (instanceTypeInfo(instance.InstanceType ?? '')?.vcpus ?? null),
          });
        }
      }
    }
    const unknown = [...new Set(found.filter((instance) => instance.vcpus === null).map((instance) => instance.instanceType))];
    const described = unknown.length === 0 ? new Map<string, number>() : await this.vcpusOf(region, unknown);
    return found.map((instance) => ({
      instanceType: instance.instanceType,
      market: marketOfLifecycle(instance.lifecycle),
      vcpus: instance.vcpus ?? described.get(instance.instanceType) ?? null,
    }));
  }

  /** By filter rather than by name: EC2 refuses a whole DescribeInstanceTypes that names one type it does not know. */
  async vcpusOf(region: string, instanceTypes: readonly string[]): Promise<ReadonlyMap<string, number>> {
    const vcpus = new Map<string, number>();
    for (const chunk of chunks([...new Set(instanceTypes)], FILTER_VALUES)) {
      const pages = paginateDescribeInstanceTypes({ client: this.#clients.ec2(region) }, { Filters: [{ Name: 'instance-type', Values: chunk }] });
      for (const page of await this.#pages('ec2:DescribeInstanceTypes', region, pages)) {
        for (const type of page.InstanceTypes ?? []) {
          const count = type.VCpuInfo?.DefaultVCpus;
          if (type.InstanceType !== undefined && count !== undefined) vcpus.set(type.InstanceType, count);
        }
      }
    }
    return vcpus;
  }

  async subnets(region: string, subnetIds: readonly string[]): Promise<SubnetFacts[]> {
    if (subnetIds.length === 0) return [];
    // A filter, not SubnetIds: one missing id would refuse the whole call (InvalidSubnetID.NotFound).
    const answer = await this.#call('ec2:DescribeSubnets', region, () =>
      this.#clients.ec2(region).send(new DescribeSubnetsCommand({ Filters: [{ Name: 'subnet-id', Values: [...subnetIds] }] })),
    );
    return (answer.Subnets ?? []).map((subnet) => ({
      subnetId: subnet.SubnetId ?? '',
      vpcId: subnet.VpcId ?? '',
      zone: subnet.AvailabilityZone ?? '',
      state: subnet.State ?? 'unknown',
      mapPublicIpOnLaunch: subnet.MapPublicIpOnLaunch === true,
      availableIps: subnet.AvailableIpAddressCount ?? null,
    }));
  }

  async routeTables(region: string, vpcIds: readonly string[]): Promise<RouteTableFacts[]> {
    if (vpcIds.length === 0) return [];
    const tables: RouteTableFacts[] = [];
    const pages = paginateDescribeRouteTables({ client: this.#clients.ec2(region) }, { Filters: [{ Name: 'vpc-id', Values: [...vpcIds] }] });
    for (const page of await this.#pages('ec2:DescribeRouteTables', region, pages)) {
      for (const table of page.RouteTables ?? []) {
        const associations = table.Associations ?? [];
        tables.push({
          routeTableId: table.RouteTableId ?? '',
          vpcId: table.VpcId ?? '',
          main: associations.some((association) => association.Main === true),
          subnetIds: associations.flatMap((association) => (association.SubnetId === undefined ? [] : [association.SubnetId])),
          routes: (table.Routes ?? []).map(routeFacts),
        });
      }
    }
    return tables;
  }

  async vpcEndpoints(region: string, vpcIds: readonly string[]): Promise<VpcEndpointFacts[]> {
    if (vpcIds.length === 0) return [];
    const endpoints: VpcEndpointFacts[] = [];
    const pages = paginateDescribeVpcEndpoints({ client: this.#clients.ec2(region) }, { Filters: [{ Name: 'vpc-id', Values: [...vpcIds] }] });
    for (const page of await this.#pages('ec2:DescribeVpcEndpoints', region, pages)) {
      for (const endpoint of page.VpcEndpoints ?? []) {
        endpoints.push({
          vpcEndpointId: endpoint.VpcEndpointId ?? '',
          vpcId: endpoint.VpcId ?? '',
          serviceName: endpoint.ServiceName ?? '',
          privateDns: endpoint.PrivateDnsEnabled === true,
          state: endpoint.State ?? 'unknown',
        });
      }
    }
    return endpoints;
  }

  async vpcs(region: string, vpcIds: readonly string[]): Promise<string[]> {
    if (vpcIds.length === 0) return [];
    // By filter: a VpcIds list with one unknown id fails the whole call.
    const answer = await this.#call('ec2:DescribeVpcs', region, () => this.#clients.ec2(region).send(new DescribeVpcsCommand({ Filters: [{ Name: 'vpc-id', Values: [...vpcIds] }] })));
    return (answer.Vpcs ?? []).flatMap((vpc) => (vpc.VpcId === undefined ? [] : [vpc.VpcId]));
  }

  async natGateways(region: string, vpcIds: readonly string[]): Promise<NatGatewayFacts[]> {
    if (vpcIds.length === 0) return [];
    const gateways: NatGatewayFacts[] = [];
    const pages = paginateDescribeNatGateways({ client: this.#clients.ec2(region) }, { Filter: [{ Name: 'vpc-id', Values: [...vpcIds] }] });
    for (const page of await this.#pages('ec2:DescribeNatGateways', region, pages)) {
      for (const gateway of page.NatGateways ?? []) {
        gateways.push({
          natGatewayId: gateway.NatGatewayId ?? '',
          subnetId: gateway.SubnetId ?? '',
          vpcId: gateway.VpcId ?? '',
          // EC2 leaves it out for gateways made before private ones existed: those are public.
          connectivity: gateway.ConnectivityType ?? 'public',
          state: gateway.State ?? 'unknown',
        });
      }
    }
    return gateways;
  }

  async offerings(region: string, instanceTypes: readonly string[], zones: readonly string[]): Promise<ReadonlyMap<string, readonly string[]>> {
    const offered = new Map<string, string[]>();
    // No zones named (no subnets configured yet): every zone of the region.
    const location = zones.length === 0 ? [] : [{ Name: 'location', Values: [...zones] }];
    for (const chunk of chunks([...new Set(instanceTypes)], FILTER_VALUES)) {
      const pages = paginateDescribeInstanceTypeOfferings(
        { client: this.#clients.ec2(region) },
        { LocationType: 'availability-zone', Filters: [{ Name: 'instance-type', Values: chunk }, ...location] },
      );
      for (const page of await this.#pages('ec2:DescribeInstanceTypeOfferings', region, pages)) {
        for (const offering of page.InstanceTypeOfferings ?? []) {
          if (offering.InstanceType === undefined || offering.Location === undefined) continue;
          offered.set(offering.InstanceType, [...(offered.get(offering.InstanceType) ?? []), offering.Location]);
        }
      }
    }
    return offered;
  }

  async parameter(region: string, name: string): Promise<string | null> {
    try {
      const answer = await this.#call('ssm:GetParameter', region, () => this.#clients.ssm(region).send(new GetParameterCommand({ Name: name })));
      return answer.Parameter?.Value ?? null;
    } catch (error) {
      if (awsErrorCode(error) === 'ParameterNotFound') return null;
      throw error;
    }
  }

  async image(region: string, imageId: string): Promise<ImageFacts | null> {
    try {
      const answer = await this.#call('ec2:DescribeImages', region, () => this.#clients.ec2(region).send(new DescribeImagesCommand({ ImageIds: [imageId] })));
      const image = answer.Images?.[0];
      if (image === undefined) return null;
      return { imageId: image.ImageId ?? imageId, state: image.State ?? 'unknown', architecture: image.Architecture ?? null };
    } catch (error) {
      if (awsErrorCode(error).startsWith('InvalidAMIID.')) return null;
      throw error;
    }
  }

  /**
   * HeadBucket: 200 reachable (S3 says the region), 404 missing, 403 forbidden. A bucket
   * in another region answers 301 with its region in a header.
   */
  async bucket(name: string): Promise<BucketFacts> {
    try {
      const answer = await this.#clients.s3.send(new HeadBucketCommand({ Bucket: name }));
      return { kind: 'reachable', region: answer.BucketRegion ?? null };
    } catch (error) {
      const status = httpStatus(error);
      if (status === 404 || awsErrorCode(error) === 'NotFound' || awsErrorCode(error) === 'NoSuchBucket') return { kind: 'missing' };
      if (status === 403) return { kind: 'forbidden' };
      if (status === 301) {
        const headers = (error as { $response?: { headers?: Record<string, string> } }).$response?.headers ?? {};
        return { kind: 'reachable', region: headers['x-amz-bucket-region'] ?? null };
      }
      throw error;
    }
  }

  /** Sends one call; a refused permission becomes a PermissionDeniedError naming `action`. */
  async #call<T>(action: string, region: string, send: () => Promise<T>): Promise<T> {
    try {
      return await send();
    } catch (error) {
      throw refusedAs(action, region, error);
    }
  }

  /**
   * Every page an SDK paginator yields (it follows NextToken until EC2 gives none), read
   * before any is used: a refused permission on any page becomes a PermissionDeniedError
   * naming `action`, as for one call.
   */
  async #pages<T>(action: string, region: string, pages: AsyncIterable<T>): Promise<T[]> {
    const read: T[] = [];
    try {
      for await (const page of pages) read.push(page);
    } catch (error) {
      throw refusedAs(action, region, error);
    }
    return read;
  }
}

/** A refused permission as a PermissionDeniedError naming `action`; any other error as it is. */
function refusedAs(action: string, region: string, error: unknown): unknown {
  if (!isPermissionDenied(error)) return error;
  return new PermissionDeniedError(action, `${action}${region === 'global' ? '' : ` in ${region}`} was refused: ${awsErrorCode(error) || `HTTP ${httpStatus(error) ?? '?'}`}`);
}
