// Every AWS call a Lambda handler makes in the suite, recorded with what it was sent, its
// region, what came back, and the state of the resources it acted on just before: the
// IAM check evaluates each one against the function's role. And a guard: any request
// bound for a host other than 127.0.0.1 fails before it is sent.
//
// The SDK's clients all share one base class; its `send` is wrapped once so that every
// client, whoever builds it (the handlers build theirs in functions/shared/deps.ts), gets
// the two middlewares on its first call.

import { AsyncLocalStorage } from 'node:async_hooks';
import { EC2Client } from '@aws-sdk/client-ec2';
import type { LambdaName } from '../../../infra/lambda-catalog.ts';

/** What the resources a call acts on looked like just before it (resource tags, template contents). */
export type Observed = Readonly<Record<string, unknown>>;

/** One AWS call, as a handler made it. */
export interface RecordedCall {
  /** The deployment (stack id) whose function made it. */
  readonly deployment: string;
  readonly fn: LambdaName;
  /** `EC2`, `SSM`, `DynamoDB`, `SFN`, ... (the client's name without `Client`). */
  readonly service: string;
  /** `CreateFleet`, ... (the command's name without `Command`). */
  readonly operation: string;
  readonly region: string;
  readonly input: Readonly<Record<string, unknown>>;
  observed?: Observed;
  output?: Readonly<Record<string, unknown>>;
  error?: { readonly name: string; readonly message: string };
}

/** What a call is made within: the function running, and the suite's hooks. */
export interface CallScope {
  readonly deployment: string;
  readonly fn: LambdaName;
  /** Looks at the resources the call acts on, before it is sent (with clients outside any scope). */
  readonly observe?: (call: RecordedCall) => Promise<Observed | undefined>;
  /** Answers the call instead of moto (where moto is known to differ); undefined sends it. */
  readonly answer?: (call: RecordedCall) => Promise<Record<string, unknown> | undefined>;
  /** Runs once the call has succeeded. */
  readonly after?: (call: RecordedCall) => Promise<void>;
}

const scopes = new AsyncLocalStorage<CallScope>();
const calls: RecordedCall[] = [];
const instrumented = new WeakSet<object>();
let installed = false;

/** Runs `body` as the given function: its AWS calls are recorded under it. */
export function inScope<T>(scope: CallScope, body: () => Promise<T>): Promise<T> {
  return scopes.run(scope, body);
}

/** Runs `body` outside any function's scope (the suite's own look at moto). */
export function outsideScope<T>(body: () => Promise<T>): Promise<T> {
  return scopes.exit(body);
}

/** Every call recorded since the last `takeCalls`, and forgets them. */
export function takeCalls(): RecordedCall[] {
  return calls.splice(0, calls.length);
}

/** Every call recorded since the last `takeCalls`, kept. */
export function recordedCalls(): readonly RecordedCall[] {
  return calls;
}

interface MiddlewareClient {
  readonly middlewareStack: {
    add(middleware: unknown, options: Record<string, unknown>): void;
  };
  readonly config: { region: () => Promise<string> | string };
  send(...args: unknown[]): Promise<unknown>;
}

type Handler = (args: { input: Record<string, unknown>; request?: unknown }) => Promise<{ output: Record<string, unknown>; response: unknown }>;
type Context = { clientName?: string; commandName?: string };

/** Wraps the SDK clients' shared `send` once per process. */
export function installRecorder(): void {
  if (installed) return;
  installed = true;
  const base = Object.getPrototypeOf(EC2Client.prototype) as MiddlewareClient;
  const send = base.send;
  base.send = function (this: MiddlewareClient, ...args: unknown[]) {
    if (!instrumented.has(this)) {
      instrumented.add(this);
      instrument(this);
    }
    return send.apply(this, args);
  };
}

function instrument(client: MiddlewareClient): void {
  client.middlewareStack.add(
    (next: Handler, context: Context): Handler =>
      async (args) => {
        const scope = scopes.getStore();
        if (scope === undefined) return next(args);
        const region = await client.config.region();
        const call: RecordedCall = {
          deployment: scope.deployment,
          fn: scope.fn,
          service: (context.clientName ?? 'Unknown').replace(/Client$/, ''),
          operation: (context.commandName ?? 'Unknown').replace(/Command$/, ''),
          region,
          input: structuredClone(args.input),
        };
        calls.push(call);
        if (scope.observe !== undefined) call.observed = await outsideScope(() => (scope.observe as NonNullable<CallScope['observe']>)(call));
        try {
          const answered = scope.answer === undefined ? undefined : await outsideScope(() => (scope.answer as NonNullable<CallScope['answer']>)(call));
          const result = answered === undefined ? await next(args) : { output: { $metadata: {}, ...answered }, response: {} };
          call.output = result.output;
          if (scope.after !== undefined) await outsideScope(() => (scope.after as NonNullable<CallScope['after']>)(call));
          return result;
        } catch (error) {
          call.error = { name: (error as Error).name, message: (error as Error).message };
          throw error;
        }
      },
    { step: 'initialize', name: 'relaunchSuiteRecorder', priority: 'high' },
  );
  client.middlewareStack.add(
    (next: Handler): Handler =>
      async (args) => {
        const hostname = (args.request as { hostname?: string } | undefined)?.hostname;
        if (hostname !== '127.0.0.1') throw new Error(`the suite refused a request to ${String(hostname)}: only 127.0.0.1 (moto_server) may be reached`);
        return next(args);
      },
    { step: 'finalizeRequest', name: 'relaunchSuiteLoopbackOnly', priority: 'low' },
  );
}
