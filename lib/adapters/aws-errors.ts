// What the AWS SDK throws, read the same way by every adapter.

/** The AWS error code: the SDK puts it in `name` (EC2's query errors also in `Code`). */
export function awsErrorCode(error: unknown): string {
  if (typeof error !== 'object' || error === null) return '';
  const { name, Code } = error as { name?: unknown; Code?: unknown };
  if (typeof Code === 'string') return Code;
  return typeof name === 'string' ? name : '';
}
