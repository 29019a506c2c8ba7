// JobApi: the REST API, its resources built from lib/http's route table. Job routes need
// IAM (SigV4); agent callbacks carry no AWS credentials and prove the per-attempt secret
// in the handler, after API Gateway has checked their shape.
//
// The agents' heartbeats keep jobs alive: a job whose beats are throttled for the
// heartbeat timeout is ended LOST and its instances terminated. So the agent routes get
// throttle settings of their own, apart from the stage's (which the users' routes keep),
// and can be put behind a WAF rate rule per source IP; every request is access-logged.

import { Duration, RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import * as apigateway from 'aws-cdk-lib/aws-apigateway';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as wafv2 from 'aws-cdk-lib/aws-wafv2';
import { Construct } from 'constructs';
import * as z from '../../lib/zod.ts';
import { DataCredentialsBodySchema, HeartbeatBodySchema, HoldBodySchema, LogCredentialsBodySchema, NextBodySchema, ReportBodySchema, ShipperBodySchema } from '../../lib/agent/protocol.ts';
import { ROUTES, type RouteName } from '../../lib/http/routes.ts';
import { DEFAULT_NAME_PREFIX } from '../../lib/deployment-names.ts';

/** Options of the REST API. */
export interface JobApiProps {
  /** The Lambda that serves every route (functions/api). */
  readonly handler: lambda.IFunction;
  /**
   * The stage name, the first segment of every URL.
   * @default 'v1'
   */
  readonly stageName?: string;
  /**
   * Steady requests per second of each user route (submit, list, read, cancel).
   * @default 50
   */
  readonly throttleRateLimit?: number;
  /**
   * Burst of requests allowed above the steady rate, per user route.
   * @default 100
   */
  readonly throttleBurstLimit?: number;
  /**
   * Steady requests per second of each agent route (heartbeat, report, data credentials), set per route so
   * that users cannot use them up. A node beats once a minute and reports twice per
   * attempt: the default serves thousands of nodes.
   * @default 100
   */
  readonly agentThrottleRateLimit?: number;
  /**
   * Burst of requests allowed above the steady rate, per agent route (nodes of one launch
   * start, and end, together).
   * @default 200
   */
  readonly agentThrottleBurstLimit?: number;
  /**
   * A WAF web ACL on the stage with a rate-based rule on the agent routes: a source IP
   * that sends more than this many agent requests in any 5 minutes is answered 429 (which
   * the agent backs off from, where a 403 would make it give up) until it slows down.
   * Nodes behind one NAT share an IP: allow about 10 per node. At least 10.
   * @default - no web ACL
   */
  readonly agentWafRateLimit?: number;
  /**
   * How long the stage's access log (one JSON line per request) is kept.
   * @default logs.RetentionDays.THREE_MONTHS
   */
  readonly accessLogRetention?: logs.RetentionDays;
  /**
   * Create the role API Gateway writes logs with and set it on the account (once per
   * account and region: AWS::ApiGateway::Account). API Gateway writes no access log
   * without it; turn this off where the account already has one.
   * @default true
   */
  readonly accountLogRole?: boolean;
  /**
   * Name shown in the API Gateway console.
   * @default DEFAULT_NAME_PREFIX ('relaunch')
   */
  readonly restApiName?: string;
}

/** Body models of the agent routes, from the agent protocol's zod schemas. */
const AGENT_BODIES: Partial<Record<RouteName, z.ZodMiniType>> = {
  heartbeat: HeartbeatBodySchema,
  reportPhase: ReportBodySchema,
  holdOrRun: HoldBodySchema,
  nextAttempt: NextBodySchema,
  dataCredentials: DataCredentialsBodySchema,
  logCredentials: LogCredentialsBodySchema,
  agentShipper: ShipperBodySchema,
};

/** The fields of each access log line, from API Gateway's `$context`. */
export const ACCESS_LOG_FIELDS = {
  requestId: apigateway.AccessLogField.contextRequestId(),
  ip: apigateway.AccessLogField.contextIdentitySourceIp(),
  caller: apigateway.AccessLogField.contextIdentityUserArn(),
  method: apigateway.AccessLogField.contextHttpMethod(),
  route: apigateway.AccessLogField.contextResourcePath(),
  path: apigateway.AccessLogField.contextPath(),
  status: apigateway.AccessLogField.contextStatus(),
  latency: apigateway.AccessLogField.contextResponseLatency(),
  integrationLatency: apigateway.AccessLogField.contextIntegrationLatency(),
  responseLength: apigateway.AccessLogField.contextResponseLength(),
  error: apigateway.AccessLogField.contextErrorMessage(),
  wafStatus: apigateway.AccessLogField.contextWafResponseCode(),
  requestTime: apigateway.AccessLogField.contextRequestTime(),
} as const;

/** Where the refusal's message goes in the gateway responses' body (see JobApi). */
const MESSAGE_PLACEHOLDER = 'MESSAGE';

/** The smallest limit a WAF rate-based rule accepts (requests per 5 minutes). */
export const MIN_WAF_RATE_LIMIT = 10;

/** The routes the agents call, from the route table. */
const AGENT_ROUTES = ROUTES.filter((route) => route.auth === 'agent-secret');

/** The REST API: POST/GET /jobs, GET/DELETE /jobs/{id} (IAM); agent callbacks (secret). */
export class JobApi extends Construct {
  readonly api: apigateway.RestApi;
  /** Where the stage writes one JSON line per request. */
  readonly accessLogs: logs.LogGroup;
  /** The web ACL on the stage, when `agentWafRateLimit` asked for one. */
  readonly webAcl?: wafv2.CfnWebACL;

  constructor(scope: Construct, id: string, props: JobApiProps) {
    super(scope, id);
    this.accessLogs = new logs.LogGroup(this, 'AccessLogs', {
      retention: props.accessLogRetention ?? logs.RetentionDays.THREE_MONTHS,
      removalPolicy: RemovalPolicy.RETAIN,
    });
    const agentThrottle: apigateway.MethodDeploymentOptions = {
      // A method's settings replace the stage's for it, metrics included.
      metricsEnabled: true,
      throttlingRateLimit: props.agentThrottleRateLimit ?? 100,
      throttlingBurstLimit: props.agentThrottleBurstLimit ?? 200,
    };
    this.api = new apigateway.RestApi(this, 'Api', {
      restApiName: props.restApiName ?? DEFAULT_NAME_PREFIX,
      description: 'relaunch: submit, inspect and cancel jobs; agent callbacks',
      cloudWatchRole: props.accountLogRole ?? true,
      ...((props.accountLogRole ?? true) ? { cloudWatchRoleRemovalPolicy: RemovalPolicy.RETAIN } : {}),
      endpointTypes: [apigateway.EndpointType.REGIONAL],
      deployOptions: {
        stageName: props.stageName ?? 'v1',
        tracingEnabled: true,
        metricsEnabled: true,
        // API Gateway's own errors (an integration failing, a throttle) in its execution log;
        // never request bodies, which hold task files and the agents' output.
        loggingLevel: apigateway.MethodLoggingLevel.ERROR,
        dataTraceEnabled: false,
        throttlingRateLimit: props.throttleRateLimit ?? 50,
        throttlingBurstLimit: props.throttleBurstLimit ?? 100,
        // Keys are `<resource path>/<METHOD>`: each agent route is its own setting.
        methodOptions: Object.fromEntries(
          AGENT_ROUTES.map((route) => [`${route.pattern}/${route.method}`, { ...agentThrottle, loggingLevel: apigateway.MethodLoggingLevel.ERROR }]),
        ),
        accessLogDestination: new apigateway.LogGroupLogDestination(this.accessLogs),
        accessLogFormat: apigateway.AccessLogFormat.custom(JSON.stringify(ACCESS_LOG_FIELDS)),
      },
    });
    if (props.agentWafRateLimit !== undefined) this.webAcl = this.agentRateRule(props.agentWafRateLimit);
    this.acknowledgeFindings(props.agentWafRateLimit !== undefined);
    const integration = new apigateway.LambdaIntegration(props.handler, {
      proxy: true,
      timeout: Duration.seconds(29),
      // One invoke permission for the whole API instead of two per method (and no test-invoke ones).
      scopePermissionToMethod: false,
    });
    const validator = new apigateway.RequestValidator(this, 'AgentValidator', {
      restApi: this.api,
      validateRequestBody: true,
      validateRequestParameters: true,
    });

    // API Gateway's own refusals (a body or header the validator rejects) answer with the
    // API's error shape, as the Lambda's do: {error, issues: [{path, message}]}. A gateway
    // response's template is not VTL: variables are put in as they are, with no way to
    // escape them. The validator's own text ($context.error.validationErrorString) holds
    // quotes, which would break the JSON; $context.error.messageString is the message as a
    // JSON string, quotes and all, so it goes in bare.
    const validationBody = JSON.stringify({
      error: 'the request does not match the agent protocol',
      issues: [{ path: '', message: MESSAGE_PLACEHOLDER }],
    }).replace(JSON.stringify(MESSAGE_PLACEHOLDER), () => '$context.error.messageString');
    for (const [id, type] of [
      ['BadRequestBody', apigateway.ResponseType.BAD_REQUEST_BODY],
      ['BadRequestParameters', apigateway.ResponseType.BAD_REQUEST_PARAMETERS],
    ] as const) {
      this.api.addGatewayResponse(id, {
        type,
        statusCode: '400',
        templates: { 'application/json': validationBody },
      });
    }

    for (const route of ROUTES) {
      const resource = this.api.root.resourceForPath(route.pattern);
      if (route.auth === 'iam') {
        resource.addMethod(route.method, integration, { authorizationType: apigateway.AuthorizationType.IAM });
        continue;
      }
      const body = AGENT_BODIES[route.name];
      resource.addMethod(route.method, integration, {
        authorizationType: apigateway.AuthorizationType.NONE,
        requestValidator: validator,
        requestParameters: { 'method.request.header.Authorization': true },
        requestModels:
          body === undefined ? undefined : { 'application/json': this.model(route.name, body) },
      });
    }
  }

  /**
   * A managed policy granting `execute-api:Invoke` on this API's IAM-authorized routes of
   * its stage (submit, list, read, cancel, sources), not the agents' routes: attach it to a
   * teammate's user, group or role and they may use the deployment. Its name is
   * CloudFormation's, so two deployments' policies never collide.
   */
  createSubmitPolicy(id: string): iam.ManagedPolicy {
    const stage = this.api.deploymentStage.stageName;
    const resources = ROUTES.filter((route) => route.auth === 'iam').map((route) =>
      this.api.arnForExecuteApi(route.method, route.pattern.replace(/\{[^}]+\}/g, '*'), stage),
    );
    return new iam.ManagedPolicy(this, id, {
      description: `${this.api.restApiName}: submit, list, read and cancel jobs through its API (execute-api:Invoke)`,
      statements: [new iam.PolicyStatement({ actions: ['execute-api:Invoke'], resources })],
    });
  }

  /** The API's base URL, ending in `/`. */
  get url(): string {
    return this.api.url;
  }

  /** A regional web ACL on the stage whose one rule limits each IP's agent requests. */
  /** The AWS Solutions findings this API has by design, and why each stands. */
  private acknowledgeFindings(waf: boolean): void {
    const acknowledge = (id: string, reason: string) => Validations.of(this.api).acknowledge({ id, reason });
    acknowledge(
      'AwsSolutions-COG4',
      'Job routes are IAM-authorized (SigV4 from the caller\'s AWS credentials), which suits a CLI; the agent routes carry ' +
        'a per-attempt secret that the Lambda checks in constant time. No user pool is involved.',
    );
    acknowledge(
      'AwsSolutions-APIG4',
      'The agent routes (heartbeat, report, data credentials) are authorized by the per-attempt callback secret in the Authorization header, ' +
        'checked by the Lambda: an instance has no AWS identity the API could use.',
    );
    acknowledge(
      'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs]',
      'AmazonAPIGatewayPushToCloudWatchLogs is the account-level role API Gateway needs to write access and execution logs.',
    );
    if (!waf) {
      acknowledge(
        'AwsSolutions-APIG3',
        'A web ACL costs a monthly fee; it is on when relaunch:agentWafRateLimit is set. Without it the stage and per-route ' +
          'throttles bound the load, and job routes need SigV4.',
      );
    }
  }

  private agentRateRule(limit: number): wafv2.CfnWebACL {
    if (!Number.isInteger(limit) || limit < MIN_WAF_RATE_LIMIT) {
      throw new RangeError(`JobApi agentWafRateLimit: expected an integer >= ${MIN_WAF_RATE_LIMIT} (requests per 5 minutes), got ${limit}`);
    }
    const metric = (name: string) => ({ cloudWatchMetricsEnabled: true, sampledRequestsEnabled: true, metricName: name });
    const prefix = Stack.of(this).stackName;
    const acl = new wafv2.CfnWebACL(this, 'AgentWebAcl', {
      scope: 'REGIONAL',
      description: 'relaunch: a rate limit per source IP on the agent callbacks',
      defaultAction: { allow: {} },
      visibilityConfig: metric(`${prefix}-api`),
      rules: [
        {
          name: 'AgentRoutesRatePerIp',
          priority: 0,
          action: { block: { customResponse: { responseCode: 429, responseHeaders: [{ name: 'retry-after', value: '30' }] } } },
          visibilityConfig: metric(`${prefix}-agent-rate`),
          statement: {
            rateBasedStatement: {
              limit,
              aggregateKeyType: 'IP',
              scopeDownStatement: {
                regexMatchStatement: {
                  regexString: agentPathRegex(),
                  fieldToMatch: { uriPath: {} },
                  textTransformations: [{ priority: 0, type: 'NONE' }],
                },
              },
            },
          },
        },
      ],
    });
    new wafv2.CfnWebACLAssociation(this, 'AgentWebAclAssociation', {
      resourceArn: this.api.deploymentStage.stageArn,
      webAclArn: acl.attrArn,
    });
    return acl;
  }

  private model(name: RouteName, schema: z.ZodMiniType): apigateway.Model {
    // `input`: what the agent may send; unknown fields pass, so an older API accepts a newer agent.
    const { $schema: _version, ...jsonSchema } = z.toJSONSchema(schema, { target: 'draft-04', io: 'input' });
    return this.api.addModel(`${name}Body`, {
      contentType: 'application/json',
      schema: { schema: apigateway.JsonSchemaVersion.DRAFT4, ...(jsonSchema as apigateway.JsonSchema) },
    });
  }
}

/**
 * The agent routes' paths as one regular expression, with or without the stage's segment
 * in front (a custom domain has none): `{id}`-style parameters match one segment.
 */
export function agentPathRegex(): string {
  const patterns = AGENT_ROUTES.map((route) => route.pattern.replace(/\{[^}]+\}/g, '[^/]+'));
  return `^(/[^/]+)?(${patterns.join('|')})$`;
}
