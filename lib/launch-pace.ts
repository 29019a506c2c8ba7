// The launch pace: every execution's launches drawn from one token bucket the size of
// EC2's instance-launch bucket, so a sweep of thousands of jobs waits its turn in the
// state machine instead of being throttled by EC2.
//
// The bucket is kept as one number, the time its debt is paid off (the "theoretical
// arrival time" of the generic cell rate algorithm): each instance adds 1/perSecond
// seconds to it, and a launch may go once that time is at most `burst` instances ahead
// of the clock. One number means one conditional write per launch, however many wait.

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
 * One reservation: `paidOffAt` (ms since the epoch) is the bucket as stored, `instances`
 * the launch's size. Returns the bucket's new paid-off time and when the launch may go
 * (at or before `now` when the bucket had room).
 */
export function reserveSlot(
  paidOffAt: number,
  now: number,
  instances: number,
  config: LaunchPaceConfig,
): { readonly paidOffAt: number; readonly launchAt: number } {
  const next = Math.max(paidOffAt, now) + paceMs(instances, config);
  return { paidOffAt: next, launchAt: launchAtFor(next, config) };
}

/**
 * The bucket's paid-off time once a launch of `instances` that will not happen gives its
 * tokens back: earlier by its time, but never behind `now` (the bucket holds no more than
 * its burst).
 */
export function releasedSlot(paidOffAt: number, now: number, instances: number, config: LaunchPaceConfig): number {
  return Math.max(now, paidOffAt - paceMs(instances, config));
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

/** A LaunchPace held in memory: for one process (tests, the scale simulation). */
export class MemoryLaunchPace implements LaunchPace {
  #paidOffAt = 0;
  /** The later slots given, by holder. */
  readonly #slots = new Map<string, { readonly instances: number; readonly launchAt: number }>();
  readonly #config: LaunchPaceConfig;

  constructor(config: LaunchPaceConfig = EC2_LAUNCH_PACE) {
    this.#config = config;
  }

  reserve(instances: number, now: number, holder?: string): Promise<number> {
    const slot = reserveSlot(this.#paidOffAt, now, instances, this.#config);
    this.#paidOffAt = slot.paidOffAt;
    if (holder !== undefined && slot.launchAt > now) this.#slots.set(holder, { instances, launchAt: slot.launchAt });
    return Promise.resolve(slot.launchAt);
  }

  release(holder: string, now: number): Promise<boolean> {
    const slot = this.#slots.get(holder);
    this.#slots.delete(holder);
    if (slot === undefined || slot.launchAt <= now) return Promise.resolve(false);
    this.#paidOffAt = releasedSlot(this.#paidOffAt, now, slot.instances, this.#config);
    return Promise.resolve(true);
  }
}
