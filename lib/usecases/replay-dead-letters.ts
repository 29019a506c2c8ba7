// The janitor's replay: events whose delivery gave up (EventBridge's retries, or Lambda's
// async retries of on-ec2-event) wait in dead-letter queues; each is applied again through
// the use case its rule feeds. Use cases ignore what they have already applied, so a letter
// applied twice, or late, changes nothing.

import {
  Ec2EventSchema,
  EXECUTION_STATUS_CHANGE,
  ExecutionEndedEventSchema,
  executionEndedOf,
  instanceEventOf,
} from '../aws-events.ts';
import type { DeadLetter, DeadLetters, JobEnded } from '../ports.ts';
import * as z from '../zod.ts';
import { errorMessage, type UseCaseDeps } from './deps.ts';
import { onExecutionEnded } from './execution-ended.ts';
import { onInstanceEvent } from './instance-event.ts';

/** Letters read per replay: a scheduled run must end well inside its Lambda's timeout. */
export const REPLAY_BATCH = 50;

/**
 * A letter received this many times is left where it is: it fails every time (a bug, or
 * an event relaunch cannot read), and its queue's alarm asks an operator to look.
 */
export const MAX_REPLAYS = 5;

/** What happened to one letter; `ended` when applying it ended a job. */
export interface ReplayedLetter {
  readonly queue: string;
  readonly outcome: 'applied' | 'failed' | 'unreadable' | 'given up';
  readonly detail: string;
  readonly ended?: JobEnded;
}

/**
 * Lambda's on-failure record: the event is its requestPayload. An EventBridge dead letter
 * is the event itself.
 */
const OnFailureRecordSchema = z.object({ requestPayload: z.unknown() });
const ReplayableSchema = z.union([Ec2EventSchema, ExecutionEndedEventSchema]);

/**
 * Reads up to REPLAY_BATCH letters and applies each: an EC2 event to `onInstanceEvent`,
 * an execution's end to `onExecutionEnded`. An applied letter is deleted; one that fails
 * stays for the next replay, until it has been received MAX_REPLAYS times; one that is
 * not an event relaunch reads stays, reported as unreadable.
 */
export async function replayDeadLetters(
  deadLetters: DeadLetters,
  deps: Pick<UseCaseDeps, 'store' | 'workflow' | 'compute' | 'clock' | 'secrets'>,
): Promise<ReplayedLetter[]> {
  const letters = await deadLetters.receive(REPLAY_BATCH);
  const replayed: ReplayedLetter[] = [];
  for (const letter of letters) {
    const event = readEvent(letter);
    if (typeof event === 'string') {
      replayed.push({ queue: letter.queue, outcome: 'unreadable', detail: event });
      continue;
    }
    if (letter.receiveCount > MAX_REPLAYS) {
      replayed.push({ queue: letter.queue, outcome: 'given up', detail: `received ${letter.receiveCount} times; left for an operator` });
      continue;
    }
    try {
      const result =
        event['detail-type'] === EXECUTION_STATUS_CHANGE
          ? await onExecutionEnded(executionEndedOf(event), deps)
          : await onInstanceEvent(instanceEventOf(event), deps);
      await deadLetters.remove(letter);
      const ended = 'ended' in result ? result.ended : undefined;
      replayed.push({ queue: letter.queue, outcome: 'applied', detail: `${result.action}: ${result.reason}`, ...(ended === undefined ? {} : { ended }) });
    } catch (error) {
      replayed.push({ queue: letter.queue, outcome: 'failed', detail: errorMessage(error) });
    }
  }
  return replayed;
}

/** The event a letter holds, or why it holds none relaunch reads. */
function readEvent(letter: DeadLetter): z.infer<typeof ReplayableSchema> | string {
  let body: unknown;
  try {
    body = JSON.parse(letter.body);
  } catch {
    return 'the message is not JSON';
  }
  const record = OnFailureRecordSchema.safeParse(body);
  const event = ReplayableSchema.safeParse(record.success ? record.data.requestPayload : body);
  if (!event.success) return 'the message is neither an EC2 event nor an execution\'s end relaunch handles';
  return event.data;
}
