// Two deployments of the shipped app in one account and region, each with its own failover
// region, on moto: two stacks with nothing shared (stack, physical name, export, rule, IAM
// scope); and a second stack of a prefix already deployed, refused before it makes anything.

import { CreateSecurityGroupCommand, EC2Client } from '@aws-sdk/client-ec2';
import { ListTablesCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { beforeAll, describe, expect, it } from 'vitest';
import { DEPLOYMENT_TAG_KEY } from '../../../lib/workflow/resources.ts';
import { resolveCfn, type CfnTemplate } from '../../support/cfn-intrinsics.ts';
import { createNetwork, deploy, StackRefusedError, type Deployment } from './deploy.ts';
import { evaluate } from './iam.ts';
import { useWorld, type StackInWorld } from './world.ts';

const world = useWorld();
let staging: StackInWorld;
let prod: StackInWorld;

/** A failover region's network and security group, made in moto. */
async function away(region: string) {
  const network = await createNetwork(world().moto, region, [`${region}a`]);
  const ec2 = new EC2Client({ region, endpoint: world().moto.endpoint });
  const group = await ec2.send(new CreateSecurityGroupCommand({ GroupName: `jobs-${region}`, Description: 'jobs', VpcId: network.vpcId }));
  return { region, subnetsByZone: network.subnetsByZone, securityGroupIds: [group.GroupId as string] };
}

beforeAll(async () => {
  staging = await world().deploy({ config: { namePrefix: 'staging', otherRegions: [await away('us-west-2')] } });
  prod = await world().deploy({ config: { namePrefix: 'prod', otherRegions: [await away('eu-west-1')] } });
});

/** The names a template gives its resources itself (`…Name` properties), and its exports. */
function givenNames(template: CfnTemplate): string[] {
  return Object.values(template.Resources).flatMap((resource) =>
    Object.entries(resource.Properties ?? {})
      .filter(([key, value]) => /Name$/.test(key) && typeof value === 'string' && !/^(AttributeName|IndexName|MetricName|PolicyName|StageName|DisplayName)$/.test(key))
      .map(([, value]) => value as string),
  );
}

function exportsOf(template: CfnTemplate): unknown[] {
  return Object.values((template.Outputs ?? {}) as Record<string, { Export?: { Name: unknown } }>).flatMap((output) => (output.Export === undefined ? [] : [output.Export.Name]));
}

/** Every physical id and ARN of a deployment's home stack. */
function physicalOf(deployment: Deployment): string[] {
  return Object.keys(deployment.template.Resources).flatMap((logicalId) => {
    const { ref, attributes } = deployment.values.physical(logicalId);
    return [ref, ...Object.values(attributes)].filter((value) => value.length > 3);
  });
}

const overlap = (a: readonly unknown[], b: readonly unknown[]) => a.filter((item) => b.includes(item));

describe("two deployments of the shipped app", () => {
  it('are two stacks, their forwarders four, every name apart', () => {
    const [a, b] = [staging.deployment, prod.deployment];
    expect([a.id, b.id]).toEqual(['staging-relaunch', 'prod-relaunch']);
    expect([a.forwarderStacks, b.forwarderStacks]).toEqual([{ 'us-west-2': 'staging-relaunch-events-us-west-2' }, { 'eu-west-1': 'prod-relaunch-events-eu-west-1' }]);
    const named = (d: Deployment) => [givenNames(d.template), ...Object.values(d.forwarders).map(givenNames)].flat();
    expect(named(a).length).toBeGreaterThan(10);
    expect(overlap(named(a), named(b))).toEqual([]);
    expect(overlap(physicalOf(a), physicalOf(b))).toEqual([]);
    const exports = (d: Deployment) => [d.template, ...Object.values(d.forwarders)].flatMap(exportsOf);
    expect(overlap(exports(a), exports(b))).toEqual([]);
  });

  it('have rules of their own, and the execution rules match only their own state machine', () => {
    const [a, b] = [staging.deployment, prod.deployment];
    const rules = (d: Deployment) => Object.entries(d.template.Resources).filter(([, r]) => r.Type === 'AWS::Events::Rule').map(([id]) => d.values.physical(id).attributes.Arn);
    expect(rules(a)).toHaveLength(rules(b).length);
    expect(overlap(rules(a), rules(b))).toEqual([]);
    const machine = (d: Deployment) => d.only('AWS::StepFunctions::StateMachine').physical.attributes.Arn as string;
    const executionPatterns = (d: Deployment) =>
      Object.values(d.template.Resources)
        .filter((r) => r.Type === 'AWS::Events::Rule')
        .map((r) => JSON.stringify(resolveCfn(r.Properties?.EventPattern ?? null, d.values)))
        .filter((pattern) => pattern.includes('Execution Status Change'));
    for (const [own, other] of [[a, b], [b, a]] as const) {
      expect(executionPatterns(own).length).toBeGreaterThan(0);
      for (const pattern of executionPatterns(own)) {
        expect(pattern).toContain(machine(own));
        expect(pattern).not.toContain(machine(other));
      }
    }
  });

  it("give no role of one a permission on any resource of the other", async () => {
    for (const [own, other] of [[staging.deployment, prod.deployment], [prod.deployment, staging.deployment]] as const) {
      const theirs = physicalOf(other).filter((value) => value.startsWith('arn:'));
      const tagged = { [`aws:ResourceTag/${DEPLOYMENT_TAG_KEY}`]: other.namePrefix };
      const granted: string[] = [];
      let asked = 0;
      for (const fn of Object.values(own.functions)) {
        const actions = new Set(fn.statements.filter((s) => s.Effect === 'Allow').flatMap((s) => [s.Action].flat()).filter((action) => !action.includes('*')));
        for (const action of actions) {
          // Reads that list the account's instances and images are account-wide by nature.
          if (/^ec2:Describe/.test(action)) continue;
          const service = action.split(':')[0] as string;
          for (const resource of theirs.filter((arn) => arn.split(':')[2] === service)) {
            asked += 1;
            const answer = await evaluate(fn.roleArn, fn.statements, { action, resource, context: tagged }, own.account);
            if (answer === 'Allowed') granted.push(`${fn.name} ${action} ${resource}`);
          }
        }
      }
      expect(granted, `${own.id} on ${other.id}`).toEqual([]);
      // Each role was asked about the other's table, queues, state machine, roles, bucket...
      expect(asked).toBeGreaterThan(50);
    }
  }, 240_000);
});

describe('a second stack of a prefix already deployed', () => {
  it('is refused at its first resource, the log group named from the prefix, before anything else is made', async () => {
    const dynamo = new DynamoDBClient({ region: 'us-east-1', endpoint: world().moto.endpoint });
    const tables = async () => (await dynamo.send(new ListTablesCommand({}))).TableNames ?? [];
    const before = await tables();
    const network = await createNetwork(world().moto, 'us-east-1', ['us-east-1c']);
    // The same prefix as prod's, as a user on another checkout with another stack id would deploy it.
    const again = deploy(world().moto, { namePrefix: 'prod', vpcId: network.vpcId, subnetsByZone: network.subnetsByZone });
    await expect(again).rejects.toThrow(StackRefusedError);
    await expect(again).rejects.toThrow(/\/aws\/vendedlogs\/states\/prod-controller/);
    expect(await tables()).toEqual(before);
  });
});
