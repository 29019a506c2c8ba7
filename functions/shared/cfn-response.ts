// A Lambda-backed CloudFormation custom resource's side of the protocol: the request
// CloudFormation sends, and the answer it waits for at the request's presigned URL (it
// waits up to an hour for one, so every request is answered, failures included).

import * as z from '../../lib/zod.ts';

/** What CloudFormation sends a custom resource's function (the fields relaunch reads). */
export const CustomResourceRequestSchema = z.object({
  RequestType: z.enum(['Create', 'Update', 'Delete']),
  ResponseURL: z.url(),
  StackId: z.string(),
  RequestId: z.string(),
  LogicalResourceId: z.string(),
  PhysicalResourceId: z.optional(z.string()),
});
export type CustomResourceRequest = z.infer<typeof CustomResourceRequestSchema>;

/** CloudFormation refuses an answer over 4 KB: a reason is cut well below it. */
const MAX_REASON = 3000;

/**
 * PUTs the answer to the request's URL: SUCCESS, or FAILED with its reason (CloudFormation
 * shows it as the resource's status reason, and `cdk destroy` prints it).
 */
export async function answerCloudFormation(
  request: CustomResourceRequest,
  physicalResourceId: string,
  outcome: { readonly status: 'SUCCESS' } | { readonly status: 'FAILED'; readonly reason: string },
): Promise<void> {
  const body = JSON.stringify({
    Status: outcome.status,
    Reason: outcome.status === 'FAILED' ? outcome.reason.slice(0, MAX_REASON) : 'done',
    PhysicalResourceId: physicalResourceId,
    StackId: request.StackId,
    RequestId: request.RequestId,
    LogicalResourceId: request.LogicalResourceId,
  });
  // The URL is signed with no content type: any other is refused.
  const response = await fetch(request.ResponseURL, { method: 'PUT', body, headers: { 'content-type': '' } });
  if (!response.ok) throw new Error(`CloudFormation's response URL answered ${response.status}`);
}
