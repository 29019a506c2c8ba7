// JobApi: the REST API, its resources built from lib/http's route table. Job routes need
// IAM (SigV4); agent callbacks carry no AWS credentials and prove the per-attempt secret
// in the handler, after API Gateway has checked their shape.

import { Duration } from 'aws-cdk-lib';
import * as apigateway from 'aws-cdk-lib/aws-apigateway';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import { Construct } from 'constructs';
import * as z from '../../lib/zod.ts';
import { HeartbeatBodySchema, ReportBodySchema } from '../../lib/agent/protocol.ts';
import { ROUTES, type RouteName } from '../../lib/http/routes.ts';

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
   * Steady requests per second across the API; agents beat once a minute per node.
   * @default 50
   */
  readonly throttleRateLimit?: number;
  /**
   * Burst of requests allowed above the steady rate.
   * @default 100
   */
  readonly throttleBurstLimit?: number;
  /**
   * Name shown in the API Gateway console.
   * @default 'relaunch'
   */
  readonly restApiName?: string;
}

/** Body models of the agent routes, from the agent protocol's zod schemas. */
const AGENT_BODIES: Partial<Record<RouteName, z.ZodMiniType>> = {
  heartbeat: HeartbeatBodySchema,
  reportPhase: ReportBodySchema,
};

/** The REST API: POST/GET /jobs, GET/DELETE /jobs/{id} (IAM); agent callbacks (secret). */
export class JobApi extends Construct {
  readonly api: apigateway.RestApi;

  constructor(scope: Construct, id: string, props: JobApiProps) {
    super(scope, id);
    this.api = new apigateway.RestApi(this, 'Api', {
      restApiName: props.restApiName ?? 'relaunch',
      description: 'relaunch: submit, inspect and cancel jobs; agent callbacks',
      cloudWatchRole: false,
      endpointTypes: [apigateway.EndpointType.REGIONAL],
      deployOptions: {
        stageName: props.stageName ?? 'v1',
        tracingEnabled: true,
        metricsEnabled: true,
        throttlingRateLimit: props.throttleRateLimit ?? 50,
        throttlingBurstLimit: props.throttleBurstLimit ?? 100,
      },
    });
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
    // API's error shape, as the Lambda's do: {error, issues: [{path, message}]}.
    const validationBody = JSON.stringify({
      error: 'the request does not match the agent protocol',
      issues: [{ path: '', message: '$context.error.validationErrorString' }],
    });
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

  /** The API's base URL, ending in `/`. */
  get url(): string {
    return this.api.url;
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
