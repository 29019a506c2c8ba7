// Can a job instance in this subnet reach relaunch's API, and CloudWatch Logs? The agent
// calls the API (a regional, public API Gateway endpoint) from the instance: heartbeats,
// reports, its data credentials; and it ships the job's output to CloudWatch Logs. Decided
// from what EC2 describes: the subnet, its route table, the NAT gateway it routes through
// (and that gateway's own subnet's route), the VPC's endpoints. Pure.

import type { CheckResult } from './report.ts';

/** A subnet as EC2 describes it. */
export interface SubnetFacts {
  readonly subnetId: string;
  readonly vpcId: string;
  readonly zone: string;
  /** `available` or `pending`. */
  readonly state: string;
  /** Instances launched here get a public IPv4 address (relaunch asks for none itself). */
  readonly mapPublicIpOnLaunch: boolean;
  readonly availableIps: number | null;
}

/** Where a route sends traffic. */
export type RouteTargetKind = 'local' | 'internet-gateway' | 'nat-gateway' | 'transit-gateway' | 'peering' | 'network-interface' | 'instance' | 'virtual-private-gateway' | 'other';

/** One route of a route table. */
export interface RouteFacts {
  /** An IPv4 CIDR (`0.0.0.0/0`), or a prefix list id. */
  readonly destination: string;
  readonly targetKind: RouteTargetKind;
  readonly targetId: string;
  /** `active`, or `blackhole` when its target is gone. */
  readonly state: string;
}

/** A route table, with the subnets associated with it explicitly. */
export interface RouteTableFacts {
  readonly routeTableId: string;
  readonly vpcId: string;
  /** The VPC's main table: it routes every subnet that has no table of its own. */
  readonly main: boolean;
  readonly subnetIds: readonly string[];
  readonly routes: readonly RouteFacts[];
}

/** A VPC endpoint. */
export interface VpcEndpointFacts {
  readonly vpcEndpointId: string;
  readonly vpcId: string;
  readonly serviceName: string;
  readonly privateDns: boolean;
  readonly state: string;
}

/** A NAT gateway as EC2 describes it. */
export interface NatGatewayFacts {
  readonly natGatewayId: string;
  /** The subnet it sits in: its traffic leaves through that subnet's route table. */
  readonly subnetId: string;
  readonly vpcId: string;
  /** `public` (to the internet, through its subnet's internet gateway) or `private` (to other networks only). */
  readonly connectivity: string;
  /** `available`, `pending`, `failed`, `deleting`, `deleted`. */
  readonly state: string;
}

/** What one configured subnet is checked against. */
export interface SubnetExpectation {
  readonly region: string;
  readonly zone: string;
  readonly subnetId: string;
  /** The stack's VPC (home region only; other regions name their own security groups). */
  readonly vpcId: string | null;
}

/** The route table that routes a subnet: its own association, else the VPC's main table. */
export function routeTableOf(subnet: Pick<SubnetFacts, 'subnetId' | 'vpcId'>, tables: readonly RouteTableFacts[]): RouteTableFacts | null {
  return (
    tables.find((table) => table.subnetIds.includes(subnet.subnetId)) ??
    tables.find((table) => table.main && table.vpcId === subnet.vpcId) ??
    null
  );
}

/** The route internet-bound IPv4 traffic takes: `0.0.0.0/0`, or none. */
function defaultRoute(table: RouteTableFacts | null): RouteFacts | null {
  return table?.routes.find((route) => route.destination === '0.0.0.0/0') ?? null;
}

/**
 * The verdict on one configured subnet:
 *
 * | found | verdict |
 * |---|---|
 * | no such subnet, or in another zone or VPC | fail |
 * | no free IP address | fail |
 * | an execute-api interface endpoint with private DNS in its VPC | fail: the API's name resolves to the endpoint, which reaches private APIs only |
 * | 0.0.0.0/0 to a public NAT gateway, available, whose own subnet routes 0.0.0.0/0 to an internet gateway | ok |
 * | 0.0.0.0/0 to a NAT gateway that is private, not available, or whose subnet has no internet gateway route | fail |
 * | 0.0.0.0/0 to a NAT gateway EC2 did not describe (`natGateways` null: not read) | ok, as far as can be seen |
 * | 0.0.0.0/0 to an internet gateway, public IPs on launch | ok |
 * | 0.0.0.0/0 to an internet gateway, no public IPs | fail: instances have no address to use it |
 * | 0.0.0.0/0 to a transit gateway, peering, appliance or VPN | warn: what lies beyond is not visible from here |
 * | 0.0.0.0/0 blackholed, or no such route | fail |
 *
 * A subnet that cannot get out says whether its instances still reach CloudWatch Logs (a
 * `com.amazonaws.<region>.logs` interface endpoint with private DNS in its VPC), or
 * neither it nor the API.
 */
export function subnetCheck(
  want: SubnetExpectation,
  subnet: SubnetFacts | null,
  tables: readonly RouteTableFacts[],
  endpoints: readonly VpcEndpointFacts[],
  natGateways: readonly NatGatewayFacts[] | null = null,
): CheckResult {
  const id = `subnet:${want.zone}`;
  const named = `${want.subnetId} (${want.zone})`;
  const find = `aws ec2 describe-subnets --region ${want.region} --filters Name=availability-zone,Values=${want.zone}${want.vpcId === null ? '' : ` Name=vpc-id,Values=${want.vpcId}`}`;
  const setIt = `set relaunch:subnets to a subnet of ${want.zone}${want.vpcId === null ? '' : ` in ${want.vpcId}`} (${find}) and redeploy`;
  if (subnet === null) return { id, status: 'fail', message: `${named}: no such subnet in ${want.region}`, fix: setIt };
  if (subnet.zone !== want.zone) return { id, status: 'fail', message: `${named}: the subnet is in ${subnet.zone}, not ${want.zone}`, fix: setIt };
  if (want.vpcId !== null && subnet.vpcId !== want.vpcId) {
    return { id, status: 'fail', message: `${named}: the subnet is in ${subnet.vpcId}, not the stack's VPC ${want.vpcId}`, fix: setIt };
  }
  if (subnet.availableIps === 0) {
    return { id, status: 'fail', message: `${named}: no free IP address left in the subnet`, fix: `free addresses in ${want.subnetId}, or ${setIt}` };
  }
  const blocking = endpoints.find(
    (endpoint) => endpoint.vpcId === subnet.vpcId && endpoint.privateDns && endpoint.serviceName === `com.amazonaws.${want.region}.execute-api` && endpoint.state.toLowerCase() === 'available',
  );
  if (blocking !== undefined) {
    return {
      id,
      status: 'fail',
      message: `${named}: ${blocking.vpcEndpointId} (execute-api, private DNS on) in ${subnet.vpcId} takes every execute-api name, and such an endpoint reaches private APIs only: instances here cannot reach relaunch's regional API`,
      fix: `aws ec2 modify-vpc-endpoint --region ${want.region} --vpc-endpoint-id ${blocking.vpcEndpointId} --no-private-dns-enabled, or use subnets of another VPC`,
    };
  }
  const table = routeTableOf(subnet, tables);
  const route = defaultRoute(table);
  const natFix = `route 0.0.0.0/0 of ${table?.routeTableId ?? `the route table of ${want.subnetId}`} to a NAT gateway (aws ec2 create-route --region ${want.region} --route-table-id ${table?.routeTableId ?? 'rtb-…'} --destination-cidr-block 0.0.0.0/0 --nat-gateway-id nat-…)`;
  const logs = endpoints.find(
    (endpoint) => endpoint.vpcId === subnet.vpcId && endpoint.privateDns && endpoint.serviceName === `com.amazonaws.${want.region}.logs` && endpoint.state.toLowerCase() === 'available',
  );
  // No way out: what the instances still reach, said after why.
  const shut = (why: string, fix: string): CheckResult => ({
    id,
    status: 'fail',
    message: `${named}: ${why}: ${
      logs === undefined
        ? `instances reach neither relaunch's API nor CloudWatch Logs (no NAT gateway or internet gateway on the way out, no com.amazonaws.${want.region}.logs endpoint in ${subnet.vpcId})`
        : `instances cannot reach relaunch's API (CloudWatch Logs only, through ${logs.vpcEndpointId})`
    }`,
    fix,
  });
  if (route === null) return shut(`no route to the internet (0.0.0.0/0) in ${table?.routeTableId ?? 'its route table'}`, natFix);
  const via = `0.0.0.0/0 via ${route.targetId}`;
  if (route.state !== 'active') return shut(`${via} is ${route.state}: its target is gone`, natFix);
  const out = `reaches the API and CloudWatch Logs through ${via}`;
  switch (route.targetKind) {
    case 'nat-gateway': {
      if (natGateways === null) return { id, status: 'ok', message: `${named}: ${out}` };
      const nat = natGateways.find((gateway) => gateway.natGatewayId === route.targetId);
      if (nat === undefined) return shut(`${via}, a NAT gateway EC2 does not know`, natFix);
      if (nat.connectivity === 'private') {
        return shut(`${route.targetId} is a private NAT gateway, which reaches other networks, never the internet`, `${natFix.replace('a NAT gateway', 'a public NAT gateway')}`);
      }
      if (nat.state !== 'available') return shut(`${route.targetId} is ${nat.state}`, natFix);
      const natTable = routeTableOf(nat, tables);
      const onward = defaultRoute(natTable);
      if (onward === null || onward.state !== 'active' || onward.targetKind !== 'internet-gateway') {
        const seen = onward === null ? 'no 0.0.0.0/0' : `0.0.0.0/0 via ${onward.targetId}${onward.state === 'active' ? '' : ` (${onward.state})`}`;
        return shut(`${via}, but that NAT gateway's subnet ${nat.subnetId} has no route to an internet gateway (${natTable?.routeTableId ?? 'its route table'}: ${seen})`, natSubnetFix(want, nat, natTable, onward !== null));
      }
      return { id, status: 'ok', message: `${named}: ${out}` };
    }
    case 'internet-gateway':
      if (subnet.mapPublicIpOnLaunch) return { id, status: 'ok', message: `${named}: ${out}, with a public IP on each instance` };
      return shut(`${via}, but the subnet gives instances no public IP, so they cannot use it`, `aws ec2 modify-subnet-attribute --region ${want.region} --subnet-id ${want.subnetId} --map-public-ip-on-launch, or ${natFix}`);
    default:
      return {
        id,
        status: 'warn',
        message: `${named}: ${via}: relaunch cannot see whether that reaches the internet; instances must reach https://*.execute-api.${want.region}.amazonaws.com and CloudWatch Logs (https://logs.${want.region}.amazonaws.com${logs === undefined ? '' : `, or ${logs.vpcEndpointId}`})`,
      };
  }
}

/** The fix for a NAT gateway whose own subnet does not route to the internet: a route there, or another NAT gateway. */
function natSubnetFix(want: SubnetExpectation, nat: NatGatewayFacts, table: RouteTableFacts | null, hasRoute: boolean): string {
  const tableId = table?.routeTableId ?? `rtb-… (the route table of ${nat.subnetId})`;
  return `aws ec2 ${hasRoute ? 'replace-route' : 'create-route'} --region ${want.region} --route-table-id ${tableId} --destination-cidr-block 0.0.0.0/0 --gateway-id igw-… (the internet gateway of ${nat.vpcId}), or route ${want.subnetId} through a NAT gateway in a subnet that has one`;
}
