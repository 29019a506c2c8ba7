// ControllerFunctions: every relaunch Lambda, bundled with esbuild (no Docker), Node 22 on
// arm64, each given only the variables of the ports it uses.

import { execFileSync } from 'node:child_process';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AssetHashType, DockerImage, Duration, RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as sns from 'aws-cdk-lib/aws-sns';
import { Construct } from 'constructs';
import { JOB_NOTIFICATIONS_TOPIC_ENV, SERVICE_NAME_ENV } from '../../lib/workflow/operations.ts';
import { EC2_LAUNCH_PACE, type LaunchPaceConfig } from '../../lib/launch-pace.ts';
import { EnvVar, type ComputeEnvConfig, type ReleaseEnvConfig } from '../../lib/workflow/env.ts';
import { restoreCachedBundle } from '../bundle.ts';
import { checkEnvironmentSize } from '../lambda-environment.ts';
import { jobSecretsPath, type DataConfig } from '../../lib/workflow/resources.ts';
import { BUNDLE_ENTRY, handlerEntry, LAMBDA_NAMES, LAMBDA_NEEDS, REPO_ROOT, type LambdaName } from '../lambda-catalog.ts';

const BUNDLE_CLI = fileURLToPath(new URL('../bundle-cli.ts', import.meta.url));

/** Options of the Lambdas. */
export interface ControllerFunctionsProps {
  /** Prefix of the functions' descriptions, and the `service` of their logs, metrics and traces. */
  readonly namePrefix: string;
  /** The jobs table's name (TABLE_NAME). */
  readonly tableName: string;
  /** The controller's ARN (STATE_MACHINE_ARN), known before the machine exists. */
  readonly stateMachineArn: string;
  /** Ec2Compute's settings, as JSON in COMPUTE_CONFIG for the function that launches, and their regions in RELEASE_CONFIG for those that release. */
  readonly computeConfig: ComputeEnvConfig;
  /** The data bucket and the buckets instances may use (DATA_CONFIG), for the API's submit checks. */
  readonly dataConfig?: DataConfig;
  /**
   * The launch pace's bucket (LAUNCH_PACE), for the function that launches.
   * @default EC2_LAUNCH_PACE
   */
  readonly launchPace?: LaunchPaceConfig;
  /**
   * Memory of each function, in MB; CPU grows with it, and so does cold-start speed.
   * @default 512
   */
  readonly memorySize?: number;
  /**
   * How long function logs are kept.
   * @default logs.RetentionDays.ONE_MONTH
   */
  readonly logRetention?: logs.RetentionDays;
}

/** Every Lambda of the catalog, by name. */
export class ControllerFunctions extends Construct {
  readonly functions: Readonly<Record<LambdaName, lambda.Function>>;

  constructor(scope: Construct, id: string, props: ControllerFunctionsProps) {
    super(scope, id);
    const entries = LAMBDA_NAMES.map((name) => [name, this.lambda(name, props)] as const);
    this.functions = Object.fromEntries(entries) as Record<LambdaName, lambda.Function>;
  }

  /** Gives the launching function the API's URL (the agents' callback address), once the API exists. */
  setApiUrl(url: string): void {
    for (const name of LAMBDA_NAMES) {
      if (LAMBDA_NEEDS[name].compute === 'launch') this.functions[name].addEnvironment(EnvVar.apiUrl, url);
    }
  }

  /**
   * Has the functions that end jobs publish each job's end to `topic`: its ARN in their
   * environment, and sns:Publish on it.
   */
  notifyJobEnds(topic: sns.ITopic): void {
    for (const name of LAMBDA_NAMES) {
      if (LAMBDA_NEEDS[name].notifies !== true) continue;
      this.functions[name].addEnvironment(JOB_NOTIFICATIONS_TOPIC_ENV, topic.topicArn);
      topic.grantPublish(this.functions[name]);
    }
  }

  private lambda(name: LambdaName, props: ControllerFunctionsProps): lambda.Function {
    const needs = LAMBDA_NEEDS[name];
    const environment: Record<string, string> = {
      [EnvVar.tableName]: props.tableName,
      // The `service` of every log line, metric and trace: the deployment's prefix, so the
      // alarms of one relaunch stack never count another's metrics.
      [SERVICE_NAME_ENV]: props.namePrefix,
    };
    if (needs.workflow.length > 0) environment[EnvVar.stateMachineArn] = props.stateMachineArn;
    // The launcher gets every launch setting; a function that only releases gets the regions
    // and the prefix, which stay small however many subnets and types a deployment has.
    if (needs.compute === 'launch') environment[EnvVar.computeConfig] = Stack.of(this).toJsonString(props.computeConfig);
    if (needs.compute === 'release') environment[EnvVar.releaseConfig] = Stack.of(this).toJsonString(releaseConfig(props));
    if ((needs.secrets ?? []).length > 0) environment[EnvVar.jobSecretsPath] = jobSecretsPath(props.namePrefix);
    if (needs.paces === true) environment[EnvVar.launchPace] = JSON.stringify(props.launchPace ?? EC2_LAUNCH_PACE);
    if (needs.data === true && props.dataConfig !== undefined) environment[EnvVar.dataConfig] = Stack.of(this).toJsonString(props.dataConfig);

    const logGroup = new logs.LogGroup(this, `${name}-logs`, {
      retention: props.logRetention ?? logs.RetentionDays.ONE_MONTH,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    const fn = new lambda.Function(this, name, {
      description: `${props.namePrefix}: ${name}`,
      code: bundledCode(name),
      handler: BUNDLE_ENTRY.handler,
      runtime: lambda.Runtime.NODEJS_22_X,
      architecture: lambda.Architecture.ARM_64,
      memorySize: props.memorySize ?? 512,
      timeout: Duration.seconds(needs.timeoutSeconds),
      tracing: lambda.Tracing.ACTIVE,
      loggingFormat: lambda.LoggingFormat.JSON,
      logGroup,
      environment,
    });
    acknowledgeFunctionFindings(fn);
    checkEnvironmentSize(fn, name);
    return fn;
  }
}

/** RELEASE_CONFIG: the regions of COMPUTE_CONFIG by name, and the prefix. */
function releaseConfig(props: ControllerFunctionsProps): ReleaseEnvConfig {
  return { namePrefix: props.computeConfig.namePrefix, regions: props.computeConfig.regions.map(({ region }) => region) };
}

/** The AWS Solutions and Serverless findings every relaunch Lambda has, and why each stands. */
function acknowledgeFunctionFindings(fn: lambda.Function): void {
  const acknowledge = (id: string, reason: string) => Validations.of(fn).acknowledge({ id, reason });
  acknowledge(
    'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]',
    'AWSLambdaBasicExecutionRole only lets the function create log streams and put log events; its log group is its own.',
  );
  const runtime = 'Node 22 is the runtime the bundles are built for and tested with (TOOLING.md); a new one is adopted deliberately.';
  acknowledge('AwsSolutions-L1', runtime);
  acknowledge('Serverless-LambdaLatestVersion', runtime);
  acknowledge(
    'Serverless-LambdaDLQ',
    'No invocation is lost without a trace: Step Functions and API Gateway invoke synchronously and see the error (the ' +
      "machine retries it); on-ec2-event has an on-failure destination queue, and the rules' targets have dead-letter " +
      'queues, all replayed by the janitor.',
  );
}

/**
 * A Lambda's code: its handler bundled by infra/bundle.ts (in a child process, since
 * asset bundling is synchronous), or its cached bundle when none of its sources changed
 * (checked here, in the synth's own process), hashed by what the bundle holds. Apps that skip bundling
 * for a stack (`cdk synth --exclusively`, tests) skip this too. Not NodejsFunction: it runs
 * esbuild's command line, which takes no plugins and writes one file, and infra/bundle.ts
 * needs both (its SDK schema rewrite and its chunks halve the EC2 functions' packages).
 */
function bundledCode(name: LambdaName): lambda.Code {
  return lambda.Code.fromAsset(dirname(handlerEntry(name)), {
    assetHashType: AssetHashType.OUTPUT,
    bundling: {
      // Required by the type, never pulled: local bundling builds or throws.
      image: DockerImage.fromRegistry('public.ecr.aws/lambda/nodejs:22'),
      local: {
        tryBundle(outputDir: string): boolean {
          // Unchanged sources: the cached bundle, without a process or a build.
          if (restoreCachedBundle(name, outputDir)) return true;
          execFileSync(process.execPath, ['--import', import.meta.resolve('tsx'), BUNDLE_CLI, name, outputDir], {
            cwd: REPO_ROOT,
            stdio: ['ignore', 'pipe', 'pipe'],
          });
          return true;
        },
      },
    },
  });
}
