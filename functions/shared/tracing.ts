// X-Ray for the Lambdas (Powertools Tracer): each AWS SDK call a handler makes becomes a
// subsegment of the invocation's trace, named by service and operation, with its retries
// and errors. Lambda's active tracing makes the invocation's segment; outside Lambda (tests,
// the local runtime) the tracer is off and clients are returned untouched.

import { Tracer } from '@aws-lambda-powertools/tracer';
import { serviceName } from './log.ts';

let instance: Tracer | undefined;

/** The shared tracer, made on first use; POWERTOOLS_TRACE_ENABLED=false turns it off. */
export function tracer(): Tracer {
  // Only the SDK clients are captured: the Lambdas make no other HTTP call, and capturing
  // every HTTPS request as well would record each SDK call twice.
  instance ??= new Tracer({ serviceName: serviceName(), captureHTTPsRequests: false });
  return instance;
}

/** The client, its calls traced when tracing is on. */
export function traced<Client>(client: Client): Client {
  return tracer().captureAWSv3Client(client);
}
