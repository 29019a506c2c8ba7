// The idempotency key of a local submit, kept where a retry finds it. A `relaunch run` that
// gives up on a runtime that does not answer (stopped, say) cannot take back the request it
// sent: the runtime may read it when it resumes and make the job. So each submit's key is
// written to `<dataDir>/submits/<key>.json` before it is sent, with what it submits (a
// SHA-256 of the task, its overrides and faults) and who sends it; the record goes once the
// runtime has answered. A later `run` of the same submission takes over a record whose
// sender gave up or died and sends the same key again: the runtime answers the job the
// first request made, or makes it now, once either way. A record another live `run` holds
// is never taken, so any number of identical runs at once each make their own job.

import { createHash, randomUUID } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { IDEMPOTENCY_KEY_LIFETIME_MS } from '../lib/usecases/submit-job.ts';
import { startIdentityOf } from '../local/server-info.ts';
import { writeWhole } from '../local/write-whole.ts';

/** The folder of the records, in a data folder. */
const SUBMITS_FOLDER = 'submits';

/** What a record holds. */
interface SubmitEntry {
  readonly key: string;
  readonly fingerprint: string;
  readonly pid: number;
  /** The sender's start identity (server-info.ts): a pid reused by another process is not the sender. */
  readonly startedAt: string | null;
  /** True once the sender gave up waiting for the answer. */
  readonly abandoned: boolean;
}

/** What is submitted, as a fingerprint: the same submission of the same task gives the same one. */
export function submissionFingerprint(parts: unknown): string {
  return createHash('sha256').update(JSON.stringify(parts)).digest('hex');
}

/** One submit's key and its record, from before it is sent until it is answered. */
export class SubmitRecord {
  private constructor(
    private readonly file: string,
    private readonly record: SubmitEntry,
    /** True when the key is one an earlier `run` sent and gave up on. */
    readonly resumed: boolean,
  ) {}

  /** The idempotency key to send. */
  get key(): string {
    return this.record.key;
  }

  /**
   * The key for a submission with this fingerprint: that of a record whose sender gave up
   * or is gone, taken over (atomically: of two takers, one gets it), else a new one. Either
   * way its record names this process until `answered` or `abandon`.
   */
  static begin(dataDir: string, fingerprint: string): SubmitRecord {
    const folder = path.join(path.resolve(dataDir), SUBMITS_FOLDER);
    mkdirSync(folder, { recursive: true, mode: 0o700 });
    const mine = (key: string): SubmitEntry => ({ key, fingerprint, pid: process.pid, startedAt: startIdentityOf(process.pid), abandoned: false });
    for (const found of reusable(folder, fingerprint)) {
      const taken = `${found.file}.${process.pid}.taking`;
      try {
        renameSync(found.file, taken);
      } catch {
        continue; // another run took it first
      }
      const record = new SubmitRecord(found.file, mine(found.record.key), true);
      record.write();
      rmSync(taken, { force: true });
      return record;
    }
    const key = randomUUID();
    const record = new SubmitRecord(path.join(folder, `${key}.json`), mine(key), false);
    record.write();
    return record;
  }

  /** The runtime answered: the job is made (or the submit refused); the key is spent. */
  answered(): void {
    rmSync(this.file, { force: true });
  }

  /** This process gives up waiting: a later run of the same submission may send the key again. */
  abandon(): void {
    writeWhole(this.file, `${JSON.stringify({ ...this.record, abandoned: true })}\n`);
  }

  private write(): void {
    writeWhole(this.file, `${JSON.stringify(this.record)}\n`);
  }
}

/** The records of this submission whose sender gave up or is gone, oldest first; expired ones are removed. */
function reusable(folder: string, fingerprint: string): { file: string; record: SubmitEntry }[] {
  const now = Date.now();
  const found: { file: string; record: SubmitEntry; at: number }[] = [];
  for (const name of readdirSync(folder)) {
    const file = path.join(folder, name);
    if (!name.endsWith('.json')) continue;
    let at: number;
    let record: SubmitEntry;
    try {
      at = statSync(file).mtimeMs;
      record = JSON.parse(readFileSync(file, 'utf8')) as SubmitEntry;
    } catch {
      continue; // being written or taken
    }
    // Past the key's lifetime the runtime would make a new job for it anyway.
    if (now - at > IDEMPOTENCY_KEY_LIFETIME_MS) {
      rmSync(file, { force: true });
      continue;
    }
    if (record.fingerprint !== fingerprint || typeof record.key !== 'string') continue;
    const senderLives = record.startedAt !== null && startIdentityOf(record.pid) === record.startedAt;
    if (record.abandoned || !senderLives) found.push({ file, record, at });
  }
  return found.sort((a, b) => a.at - b.at);
}
