// The launch pace: every execution's launches drawn from one token bucket the size of
// EC2's instance-launch bucket, so a sweep of thousands of jobs waits its turn in the
// state machine instead of being throttled by EC2.
//
// The bucket is kept as one number, the time its debt is paid off (the "theoretical
// arrival time" of the generic cell rate algorithm): each instance adds 1/perSecond
// seconds to it, and a launch may go once that time is at most `burst` instances ahead
// of the clock. One number means one conditional write per launch, however many wait.
//
// Slots are handed out at most PACE_HORIZON_SECONDS ahead. A launch that would go later
// takes no slot and asks again then: a job cancelled while it waits holds no slot far
// ahead, so a cancelled sweep does not hold up the next one for hours, and a launch that
// is retried can take at most that much twice.

import type { LaunchPace } from './ports.ts';
import * as z from './zod.ts';

/** The bucket a launch pace draws on: `burst` instances at once, then `perSecond`. */
export const LaunchPaceConfigSchema = z.strictObject({
  burst: z.number().check(z.int(), z.minimum(1), z.maximum(100_000)),
  perSecond: z.number().check(z.positive(), z.maximum(10_000)),
});
/** The bucket a launch pace draws on. */
export type LaunchPaceConfig = z.infer<typeof LaunchPaceConfigSchema>;

/**
 * EC2's default instance-launch (RunInstances resource) bucket per account and region:
 * 1,000 instances at once, then 2 a second ("Request throttling for the Amazon EC2 API",
 * Resource token bucket sizes and refill rates).
 */
export const EC2_LAUNCH_PACE: LaunchPaceConfig = { burst: 1000, perSecond: 2 };

/**
 * How far ahead a slot is handed out. A launch that would go later asks again within it
 * (one more LaunchAttempt and two transitions per half hour of waiting).
 */
export const PACE_HORIZON_SECONDS = 1800;

/** What a reservation gave: a slot (now or later), or none yet and when to ask again. */
export type PaceSlot = { readonly reserved: true; readonly launchAt: number } | { readonly reserved: false; readonly askAgainAt: number };

/**
 * One reservation: `paidOffAt` (ms since the epoch) is the bucket as stored, `instances`
 * the launch's size. A slot is given, and the bucket moved, when it is at most the horizon
 * ahead, or when the bucket is idle (a launch larger than the bucket then goes when its
 * tokens are in); otherwise nothing changes and the answer says when the slot would be
 * within the horizon.
 */
export function reserveSlot(paidOffAt: number, now: number, instances: number, config: LaunchPaceConfig): { readonly paidOffAt: number; readonly slot: PaceSlot } {
  const next = Math.max(paidOffAt, now) + paceMs(instances, config);
  const launchAt = launchAtFor(next, config);
  const horizon = now + PACE_HORIZON_SECONDS * 1000;
  if (paidOffAt > now && launchAt > horizon) return { paidOffAt, slot: { reserved: false, askAgainAt: launchAt - PACE_HORIZON_SECONDS * 1000 } };
  return { paidOffAt: next, slot: { reserved: true, launchAt } };
}

/** The latest paid-off time a queued bucket may have for a launch of `instances` to be given a slot within the horizon. */
export function latestQueuedFor(now: number, instances: number, config: LaunchPaceConfig): number {
  return now + PACE_HORIZON_SECONDS * 1000 + paceMs(config.burst, config) - paceMs(instances, config);
}

/** How far `instances` launches move the bucket's paid-off time (ms). */
export function paceMs(instances: number, config: LaunchPaceConfig): number {
  return (instances * 1000) / config.perSecond;
}

/** When a launch that moved the bucket to `paidOffAt` may go: `burst` instances earlier. */
export function launchAtFor(paidOffAt: number, config: LaunchPaceConfig): number {
  return paidOffAt - paceMs(config.burst, config);
}

/** Whole seconds to wait for a slot at `launchAt`, for a Wait state: 0 when it is due. */
export function secondsUntil(launchAt: number, now: number): number {
  return launchAt <= now ? 0 : Math.ceil((launchAt - now) / 1000);
}

/**
 * How long a launch given no slot waits before it asks again: until its slot would be
 * within the horizon, plus up to one horizon more drawn by `draw` (0..1), so that the
 * launches waiting together do not all ask in the same second. At least 1 s.
 */
export function askAgainSeconds(askAgainAt: number, now: number, draw: number): number {
  return Math.max(1, secondsUntil(askAgainAt, now) + Math.floor(draw * PACE_HORIZON_SECONDS));
}

/** A LaunchPace held in memory: for one process (tests, the scale benchmark). */
export class MemoryLaunchPace implements LaunchPace {
  #paidOffAt = 0;
  readonly #config: LaunchPaceConfig;

  constructor(config: LaunchPaceConfig = EC2_LAUNCH_PACE) {
    this.#config = config;
  }

  /** The bucket as stored: when its debt is paid off (ms since the epoch). */
  get paidOffAt(): number {
    return this.#paidOffAt;
  }

  reserve(instances: number, now: number): Promise<PaceSlot> {
    const { paidOffAt, slot } = reserveSlot(this.#paidOffAt, now, instances, this.#config);
    this.#paidOffAt = paidOffAt;
    return Promise.resolve(slot);
  }
}
