// Whether an instance in a configured subnet reaches the API: pure, one row per case.

import { describe, expect, it } from 'vitest';
import { subnetCheck, type NatGatewayFacts, type RouteFacts, type RouteTableFacts, type SubnetFacts, type VpcEndpointFacts } from '../../../../lib/check/network.ts';

const want = { region: 'us-east-1', zone: 'us-east-1a', subnetId: 'subnet-0aaa', vpcId: 'vpc-0main' };
const subnet: SubnetFacts = { subnetId: 'subnet-0aaa', vpcId: 'vpc-0main', zone: 'us-east-1a', state: 'available', mapPublicIpOnLaunch: false, availableIps: 250 };
const local: RouteFacts = { destination: '10.0.0.0/16', targetKind: 'local', targetId: 'local', state: 'active' };

function table(route: RouteFacts | null, options: Partial<RouteTableFacts> = {}): RouteTableFacts {
  return { routeTableId: 'rtb-0own', vpcId: 'vpc-0main', main: false, subnetIds: ['subnet-0aaa'], routes: route === null ? [local] : [local, route], ...options };
}
const via = (targetKind: RouteFacts['targetKind'], targetId: string, state = 'active'): RouteFacts => ({ destination: '0.0.0.0/0', targetKind, targetId, state });
const apiEndpoint = (privateDns: boolean): VpcEndpointFacts => ({ vpcEndpointId: 'vpce-0api', vpcId: 'vpc-0main', serviceName: 'com.amazonaws.us-east-1.execute-api', privateDns, state: 'available' });
const logsEndpoint: VpcEndpointFacts = { vpcEndpointId: 'vpce-0logs', vpcId: 'vpc-0main', serviceName: 'com.amazonaws.us-east-1.logs', privateDns: true, state: 'available' };
/** A NAT gateway in the public subnet subnet-0pub, whose own table is rtb-0pub. */
const nat = (options: Partial<NatGatewayFacts> = {}): NatGatewayFacts => ({ natGatewayId: 'nat-0a', subnetId: 'subnet-0pub', vpcId: 'vpc-0main', connectivity: 'public', state: 'available', ...options });
const publicTable = (route: RouteFacts | null) => table(route, { routeTableId: 'rtb-0pub', subnetIds: ['subnet-0pub'] });
const natNetwork = (natRoute: RouteFacts | null) => [table(via('nat-gateway', 'nat-0a')), publicTable(natRoute)];

describe('subnetCheck', () => {
  it.each([
    ['a NAT gateway route reaches the API', subnet, [table(via('nat-gateway', 'nat-0a'))], [], 'ok', 'through 0.0.0.0/0 via nat-0a'],
    ['an internet gateway with public IPs reaches it', { ...subnet, mapPublicIpOnLaunch: true }, [table(via('internet-gateway', 'igw-0a'))], [], 'ok', 'with a public IP'],
    ['an internet gateway without public IPs does not', subnet, [table(via('internet-gateway', 'igw-0a'))], [], 'fail', 'gives instances no public IP'],
    ['no default route does not', subnet, [table(null)], [], 'fail', 'no route to the internet'],
    ['a blackholed route does not', subnet, [table(via('nat-gateway', 'nat-0gone', 'blackhole'))], [], 'fail', 'is blackhole'],
    ['a transit gateway cannot be seen past', subnet, [table(via('transit-gateway', 'tgw-0a'))], [], 'warn', 'cannot see whether'],
    ['the main table routes a subnet with none of its own', subnet, [table(via('nat-gateway', 'nat-0main'), { subnetIds: [], main: true })], [], 'ok', 'nat-0main'],
    ['an execute-api endpoint with private DNS blocks the public API', subnet, [table(via('nat-gateway', 'nat-0a'))], [apiEndpoint(true)], 'fail', 'reaches private APIs only'],
    ['an execute-api endpoint without private DNS changes nothing', subnet, [table(via('nat-gateway', 'nat-0a'))], [apiEndpoint(false)], 'ok', 'nat-0a'],
    ['a missing subnet', null, [], [], 'fail', 'no such subnet in us-east-1'],
    ['a subnet of another zone', { ...subnet, zone: 'us-east-1b' }, [], [], 'fail', 'is in us-east-1b, not us-east-1a'],
    ['a subnet of another VPC', { ...subnet, vpcId: 'vpc-0other' }, [], [], 'fail', "not the stack's VPC vpc-0main"],
    ['a full subnet', { ...subnet, availableIps: 0 }, [table(via('nat-gateway', 'nat-0a'))], [], 'fail', 'no free IP address'],
  ] as const)('%s', (_name, facts, tables, endpoints, status, message) => {
    const result = subnetCheck(want, facts, tables, endpoints);
    expect(result).toMatchObject({ id: 'subnet:us-east-1a', status });
    expect(result.message).toContain(message);
    if (status === 'fail') expect(result.fix).toEqual(expect.any(String));
  });

  it.each([
    ['a NAT gateway whose subnet routes to an internet gateway reaches the API and CloudWatch Logs', natNetwork(via('internet-gateway', 'igw-0a')), [nat()], [], 'ok', 'reaches the API and CloudWatch Logs through 0.0.0.0/0 via nat-0a'],
    [
      'a NAT gateway in a subnet without an internet gateway route does not',
      natNetwork(null),
      [nat()],
      [],
      'fail',
      "0.0.0.0/0 via nat-0a, but that NAT gateway's subnet subnet-0pub has no route to an internet gateway (rtb-0pub: no 0.0.0.0/0): instances reach neither relaunch's API nor CloudWatch Logs",
    ],
    ['a NAT gateway whose subnet routes onward through another NAT does not', natNetwork(via('nat-gateway', 'nat-0b')), [nat()], [], 'fail', 'rtb-0pub: 0.0.0.0/0 via nat-0b'],
    ['a private NAT gateway does not', natNetwork(via('internet-gateway', 'igw-0a')), [nat({ connectivity: 'private' })], [], 'fail', 'nat-0a is a private NAT gateway, which reaches other networks, never the internet'],
    ['a NAT gateway that failed does not', natNetwork(via('internet-gateway', 'igw-0a')), [nat({ state: 'failed' })], [], 'fail', 'nat-0a is failed'],
    ['no way out, with a logs endpoint, reaches CloudWatch Logs only', [table(null)], [], [logsEndpoint], 'fail', "instances cannot reach relaunch's API (CloudWatch Logs only, through vpce-0logs)"],
    ['no way out and no logs endpoint reaches neither', [table(null)], [], [], 'fail', 'instances reach neither relaunch\'s API nor CloudWatch Logs (no NAT gateway or internet gateway on the way out, no com.amazonaws.us-east-1.logs endpoint in vpc-0main)'],
  ] as const)('%s', (_name, tables, gateways, endpoints, status, message) => {
    const result = subnetCheck(want, subnet, tables, endpoints, gateways);
    expect(result).toMatchObject({ id: 'subnet:us-east-1a', status });
    expect(result.message).toContain(message);
    if (status === 'fail') expect(result.fix).toEqual(expect.any(String));
  });

  it("fixes a NAT gateway's subnet with a route to the VPC's internet gateway, in that subnet's own table", () => {
    expect(subnetCheck(want, subnet, natNetwork(null), [], [nat()]).fix).toBe(
      'aws ec2 create-route --region us-east-1 --route-table-id rtb-0pub --destination-cidr-block 0.0.0.0/0 --gateway-id igw-… (the internet gateway of vpc-0main), or route subnet-0aaa through a NAT gateway in a subnet that has one',
    );
  });

  it('names the route table in the fix for a missing route', () => {
    expect(subnetCheck(want, subnet, [table(null)], []).fix).toContain('--route-table-id rtb-0own');
  });
});
