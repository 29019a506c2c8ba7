// AwsAccountReader's paged reads (the SDK's paginators): every page EC2 gives is read, the
// token of each sent for the next, a refusal on a later page names the action, and a token
// that is empty ends the reading. EC2 answers from a middleware on a real EC2Client, so no
// request leaves the process and nothing is stubbed beyond this file's own clients. What
// each read returns for what an account holds is tested on moto
// (test/contract/aws/check/aws-account-reader.test.ts).

import { EC2Client } from '@aws-sdk/client-ec2';
import { describe, expect, it } from 'vitest';
import { PermissionDeniedError } from '../../../../lib/check/account-reader-port.ts';
import { AwsAccountReader, type CheckClients } from '../../../../lib/check/aws-account-reader.ts';

const REGION = 'eu-west-1';

/** One request EC2 was sent: the command's name and its input. */
interface Sent {
  readonly command: string;
  readonly input: Record<string, unknown>;
}

/** An EC2 answer for a request, or an error to throw. */
type Answer = (sent: Sent, index: number) => Record<string, unknown>;

/** A reader whose EC2 in REGION answers with `answer`, and the requests it was sent. */
function readerAnswering(answer: Answer): { reader: AwsAccountReader; sent: Sent[] } {
  const sent: Sent[] = [];
  const ec2 = new EC2Client({ region: REGION, credentials: { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'secret' }, maxAttempts: 1 });
  ec2.middlewareStack.add(
    (_next, context) => async (args) => {
      // A copy: the paginator reuses its input object from page to page.
      const request = { command: context.commandName ?? '', input: { ...(args.input as Record<string, unknown>) } };
      sent.push(request);
      return { output: { $metadata: {}, ...answer(request, sent.length - 1) }, response: {} };
    },
    { step: 'initialize', name: 'answerAsEc2' },
  );
  const unused = () => {
    throw new Error('only EC2 is read in this test');
  };
  const clients = {
    get sts() {
      return unused();
    },
    get iam() {
      return unused();
    },
    get s3() {
      return unused();
    },
    cloudFormation: unused,
    ec2: (region: string) => {
      if (region !== REGION) throw new Error(`EC2 asked in ${region}, expected ${REGION}`);
      return ec2;
    },
    ssm: unused,
    serviceQuotas: unused,
  } as unknown as CheckClients;
  return { reader: new AwsAccountReader(clients), sent };
}

const instance = (type: string, lifecycle?: 'spot') => ({ InstanceType: type, CpuOptions: { CoreCount: 1, ThreadsPerCore: 2 }, ...(lifecycle === undefined ? {} : { InstanceLifecycle: lifecycle }) });

describe("AwsAccountReader's paged reads", () => {
  it('reads every page of instances in use, sending each page\'s token for the next', async () => {
    const pages = [
      { Reservations: [{ Instances: [instance('m5.large')] }], NextToken: 'page-2' },
      { Reservations: [{ Instances: [instance('c5.large', 'spot'), instance('m5.large')] }], NextToken: 'page-3' },
      { Reservations: [{ Instances: [instance('r5.large')] }] },
    ];
    const { reader, sent } = readerAnswering((_sent, index) => pages[index] ?? {});
    await expect(reader.instancesInUse(REGION)).resolves.toEqual([
      { instanceType: 'm5.large', market: 'on-demand', vcpus: 2 },
      { instanceType: 'c5.large', market: 'spot', vcpus: 2 },
      { instanceType: 'm5.large', market: 'on-demand', vcpus: 2 },
      { instanceType: 'r5.large', market: 'on-demand', vcpus: 2 },
    ]);
    expect(sent.map((request) => [request.command, request.input.NextToken])).toEqual([
      ['DescribeInstancesCommand', undefined],
      ['DescribeInstancesCommand', 'page-2'],
      ['DescribeInstancesCommand', 'page-3'],
    ]);
    expect(sent.every((request) => JSON.stringify(request.input.Filters) === JSON.stringify([{ Name: 'instance-state-name', Values: ['pending', 'running'] }]))).toBe(true);
  });

  it('ends at an empty token rather than asking again with it', async () => {
    const table = (id: string) => ({ RouteTableId: id, VpcId: 'vpc-1', Associations: [], Routes: [] });
    // Asked again, EC2 would give a table the account does not hold: it must not be asked.
    const { reader, sent } = readerAnswering((_sent, index) => (index === 0 ? { RouteTables: [table('rtb-1')], NextToken: '' } : { RouteTables: [table('rtb-again')] }));
    await expect(reader.routeTables(REGION, ['vpc-1'])).resolves.toEqual([{ routeTableId: 'rtb-1', vpcId: 'vpc-1', main: false, subnetIds: [], routes: [] }]);
    expect(sent).toHaveLength(1);
  });

  it.each([
    ['routeTables', 'DescribeRouteTablesCommand', 'ec2:DescribeRouteTables', (r: AwsAccountReader) => r.routeTables(REGION, ['vpc-1'])],
    ['vpcEndpoints', 'DescribeVpcEndpointsCommand', 'ec2:DescribeVpcEndpoints', (r: AwsAccountReader) => r.vpcEndpoints(REGION, ['vpc-1'])],
    ['natGateways', 'DescribeNatGatewaysCommand', 'ec2:DescribeNatGateways', (r: AwsAccountReader) => r.natGateways(REGION, ['vpc-1'])],
    ['offerings', 'DescribeInstanceTypeOfferingsCommand', 'ec2:DescribeInstanceTypeOfferings', (r: AwsAccountReader) => r.offerings(REGION, ['m5.large'], [])],
    ['vcpusOf', 'DescribeInstanceTypesCommand', 'ec2:DescribeInstanceTypes', (r: AwsAccountReader) => r.vcpusOf(REGION, ['m5.large'])],
  ])('%s: a permission refused on the second page of %s is a PermissionDeniedError naming the action', async (_read, command, action, read) => {
    const { reader, sent } = readerAnswering((_sent, index) => {
      if (index === 0) return { NextToken: 'page-2' };
      throw Object.assign(new Error('You are not authorized to perform this operation.'), { name: 'UnauthorizedOperation', $metadata: { httpStatusCode: 403 } });
    });
    const refused = await read(reader).then(
      () => null,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(PermissionDeniedError);
    expect(refused).toMatchObject({ action, message: `${action} in ${REGION} was refused: UnauthorizedOperation` });
    expect(sent.map((request) => [request.command, request.input.NextToken])).toEqual([
      [command, undefined],
      [command, 'page-2'],
    ]);
  });

  it('reads every page of offerings, keeping each zone a type is offered in', async () => {
    const offerings = [
      { InstanceTypeOfferings: [{ InstanceType: 'm5.large', Location: 'eu-west-1a' }], NextToken: 'o-2' },
      { InstanceTypeOfferings: [{ InstanceType: 'm5.large', Location: 'eu-west-1b' }, { InstanceType: 'c5.large', Location: 'eu-west-1a' }] },
    ];
    const { reader, sent } = readerAnswering((_sent, index) => offerings[index] ?? {});
    const offered = await reader.offerings(REGION, ['m5.large', 'c5.large'], ['eu-west-1a', 'eu-west-1b']);
    expect(Object.fromEntries(offered)).toEqual({ 'm5.large': ['eu-west-1a', 'eu-west-1b'], 'c5.large': ['eu-west-1a'] });
    expect(sent[1]?.input).toMatchObject({ LocationType: 'availability-zone', NextToken: 'o-2', Filters: [{ Name: 'instance-type', Values: ['m5.large', 'c5.large'] }, { Name: 'location', Values: ['eu-west-1a', 'eu-west-1b'] }] });
  });
});
