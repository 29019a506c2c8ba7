// ControllerFunctions: every relaunch Lambda, bundled with esbuild (no Docker), Node 22 on
// arm64, each given only the variables of the ports it uses.

import { Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as nodejs from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { join } from 'node:path';
import { EnvVar, type ComputeEnvConfig } from '../../lib/workflow/env.ts';
import { handlerEntry, LAMBDA_BUNDLE, LAMBDA_NAMES, LAMBDA_NEEDS, REPO_ROOT, type LambdaName } from '../lambda-catalog.ts';

/** Options of the Lambdas. */
export interface ControllerFunctionsProps {
  /** Prefix of the functions' descriptions. */
  readonly namePrefix: string;
  /** The jobs table's name (TABLE_NAME). */
  readonly tableName: string;
  /** The controller's ARN (STATE_MACHINE_ARN), known before the machine exists. */
  readonly stateMachineArn: string;
  /** Ec2Compute's settings, as JSON in COMPUTE_CONFIG, for the functions that launch or release. */
  readonly computeConfig: ComputeEnvConfig;
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

/** The eight Lambdas, by name. */
export class ControllerFunctions extends Construct {
  readonly functions: Readonly<Record<LambdaName, nodejs.NodejsFunction>>;

  constructor(scope: Construct, id: string, props: ControllerFunctionsProps) {
    super(scope, id);
    const entries = LAMBDA_NAMES.map((name) => [name, this.lambda(name, props)] as const);
    this.functions = Object.fromEntries(entries) as Record<LambdaName, nodejs.NodejsFunction>;
  }

  /** Gives the compute functions the API's URL (the agents' callback address), once the API exists. */
  setApiUrl(url: string): void {
    for (const name of LAMBDA_NAMES) {
      if (LAMBDA_NEEDS[name].compute !== false) this.functions[name].addEnvironment(EnvVar.apiUrl, url);
    }
  }

  private lambda(name: LambdaName, props: ControllerFunctionsProps): nodejs.NodejsFunction {
    const needs = LAMBDA_NEEDS[name];
    const environment: Record<string, string> = { [EnvVar.tableName]: props.tableName };
    if (needs.workflow.length > 0) environment[EnvVar.stateMachineArn] = props.stateMachineArn;
    if (needs.compute !== false) environment[EnvVar.computeConfig] = Stack.of(this).toJsonString(props.computeConfig);

    const logGroup = new logs.LogGroup(this, `${name}-logs`, {
      retention: props.logRetention ?? logs.RetentionDays.ONE_MONTH,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    return new nodejs.NodejsFunction(this, name, {
      description: `${props.namePrefix}: ${name}`,
      entry: handlerEntry(name),
      handler: 'handler',
      projectRoot: REPO_ROOT,
      depsLockFilePath: join(REPO_ROOT, 'package-lock.json'),
      runtime: lambda.Runtime.NODEJS_22_X,
      architecture: lambda.Architecture.ARM_64,
      memorySize: props.memorySize ?? 512,
      timeout: Duration.seconds(needs.timeoutSeconds),
      tracing: lambda.Tracing.ACTIVE,
      loggingFormat: lambda.LoggingFormat.JSON,
      logGroup,
      environment,
      bundling: {
        target: LAMBDA_BUNDLE.target,
        format: nodejs.OutputFormat.ESM,
        minify: LAMBDA_BUNDLE.minify,
        sourceMap: LAMBDA_BUNDLE.sourcemap,
        mainFields: [...LAMBDA_BUNDLE.mainFields],
        banner: LAMBDA_BUNDLE.banner,
        externalModules: [...LAMBDA_BUNDLE.external],
        bundleAwsSDK: true,
        forceDockerBundling: false,
      },
    });
  }
}
