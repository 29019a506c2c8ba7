// The scale simulation's engine: virtual time, a queue of timed events, token buckets and
// per-second meters. Nothing here sleeps or sets a timer; an event runs when the queue
// reaches its time, and the clock jumps there.

import type { Clock, Random } from '../../lib/ports.ts';

/** Something to do at a virtual time (ms since the simulation's epoch). */
type Action = () => void | Promise<void>;

interface Scheduled {
  readonly at: number;
  readonly seq: number;
  readonly action: Action;
}

/**
 * A binary min-heap of events by time, then by the order they were scheduled (so events
 * at one instant run in a stable order). Events run one at a time, each to completion
 * (its promise settled) before the next: a use case's store calls cannot interleave with
 * another's, as if every step were atomic.
 */
export class EventQueue implements Clock {
  #heap: Scheduled[] = [];
  #seq = 0;
  #now: number;
  #ran = 0;

  constructor(readonly epochMs: number) {
    this.#now = epochMs;
  }

  /** Virtual now, ms since the Unix epoch. */
  get nowMs(): number {
    return this.#now;
  }

  now(): Date {
    return new Date(this.#now);
  }

  /**
   * A wait inside an event (the report function waiting for a failing node's peers): the
   * event holds the queue as it runs to completion, so the wait jumps virtual time by `ms`
   * and events due meanwhile run after it, late by at most the wait. Time never goes back.
   */
  sleep(ms: number): Promise<void> {
    this.#now += Math.max(0, ms);
    return Promise.resolve();
  }

  /** Events run so far. */
  get ran(): number {
    return this.#ran;
  }

  /** Runs `action` at `at` (never before now). */
  at(at: number, action: Action): void {
    this.#push({ at: Math.max(at, this.#now), seq: this.#seq++, action });
  }

  /** Runs `action` `delayMs` after now. */
  after(delayMs: number, action: Action): void {
    this.at(this.#now + delayMs, action);
  }

  /** Runs every event until none is left or `until` returns true. */
  async run(until: () => boolean = () => false): Promise<void> {
    while (this.#heap.length > 0 && !until()) {
      const next = this.#pop();
      this.#now = Math.max(this.#now, next.at);
      this.#ran += 1;
      await next.action();
    }
  }

  #push(item: Scheduled): void {
    const heap = this.#heap;
    heap.push(item);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(item, heap[parent] as Scheduled)) break;
      heap[i] = heap[parent] as Scheduled;
      i = parent;
    }
    heap[i] = item;
  }

  #pop(): Scheduled {
    const heap = this.#heap;
    const top = heap[0] as Scheduled;
    const last = heap.pop() as Scheduled;
    if (heap.length > 0) {
      let i = 0;
      for (;;) {
        const left = 2 * i + 1;
        if (left >= heap.length) break;
        const right = left + 1;
        const child = right < heap.length && before(heap[right] as Scheduled, heap[left] as Scheduled) ? right : left;
        if (!before(heap[child] as Scheduled, last)) break;
        heap[i] = heap[child] as Scheduled;
        i = child;
      }
      heap[i] = last;
    }
    return top;
  }
}

function before(a: Scheduled, b: Scheduled): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq);
}

/**
 * A token bucket of `burst` tokens refilled at `perSecond`, kept as the time its debt is
 * paid off (the generic cell rate algorithm, as lib/launch-pace.ts keeps the launch pace):
 * a take may be asked for now or for a later time (a caller's retry), and the answer is
 * exact either way.
 */
export class TokenBucket {
  #paidOffAt = 0;
  readonly #msPerToken: number;

  constructor(
    readonly burst: number,
    readonly perSecond: number,
  ) {
    this.#msPerToken = 1000 / perSecond;
  }

  /** The earliest time at or after `at` that `tokens` can be taken. */
  earliest(tokens: number, at: number): number {
    return Math.max(at, this.#paidOffAt + (tokens - this.burst) * this.#msPerToken);
  }

  /** Takes `tokens` at `at` if the bucket has them; false (nothing taken) if not. */
  tryTake(tokens: number, at: number): boolean {
    if (this.earliest(tokens, at) > at) return false;
    this.take(tokens, at);
    return true;
  }

  /** Takes `tokens` at `at`, whether or not the bucket had them (a reservation). */
  take(tokens: number, at: number): void {
    this.#paidOffAt = Math.max(this.#paidOffAt, at) + tokens * this.#msPerToken;
  }
}

/**
 * Amounts per key per whole second of virtual time, keeping for each key only the current
 * second and the peak so far, so memory stays bounded however long the run. Events come in
 * time order, so a second once passed never gets more.
 */
export class PerSecondMeter {
  #second = -1;
  #current = new Map<string, number>();
  readonly #peaks = new Map<string, { amount: number; second: number }>();

  /** What `key` already has in the second of `atMs`. */
  inSecond(key: string, atMs: number): number {
    this.#roll(atMs);
    return this.#current.get(key) ?? 0;
  }

  add(key: string, amount: number, atMs: number): void {
    this.#roll(atMs);
    this.#current.set(key, (this.#current.get(key) ?? 0) + amount);
  }

  /** Every key's peak second, after folding in the current one. */
  peaks(): ReadonlyMap<string, { amount: number; second: number }> {
    this.#fold();
    return this.#peaks;
  }

  #roll(atMs: number): void {
    const second = Math.floor(atMs / 1000);
    if (second === this.#second) return;
    this.#fold();
    this.#second = second;
  }

  #fold(): void {
    for (const [key, amount] of this.#current) {
      const peak = this.#peaks.get(key);
      if (peak === undefined || amount > peak.amount) this.#peaks.set(key, { amount, second: this.#second });
    }
    this.#current = new Map();
  }
}

/** A seeded uniform draw in [0, 1) (mulberry32): the same seed, the same run. */
export function seededRandom(seed: number): Random {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
