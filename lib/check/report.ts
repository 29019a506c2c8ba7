// What `relaunch check` reports: one line per check (ok, warn or fail, with the fix for a
// failure), and with a task file the verdict on its candidates. `--json` prints exactly this.

/** ok: nothing stops relaunch here; warn: worth a look, or could not be checked; fail: this stops it. */
export type CheckStatus = 'ok' | 'warn' | 'fail';

/** One check's outcome. */
export interface CheckResult {
  /** Stable and machine-readable: `credentials`, `quota:us-east-1:g-vt:spot`, `subnet:us-east-1a`. */
  readonly id: string;
  readonly status: CheckStatus;
  /** What was found, in a sentence. */
  readonly message: string;
  /** The command or console step that fixes it; set on every fail, and on a warn that has one. */
  readonly fix?: string;
}

/** Where a candidate could launch now: a region and the configured zones that offer its type. */
export interface CandidatePlace {
  readonly region: string;
  readonly zones: readonly string[];
}

/** One `validate --json` candidate, judged against the account. */
export interface CandidateVerdict {
  /** The task of a pipeline (0-based) the candidate belongs to; absent for a single task. */
  readonly task?: number;
  readonly instanceType: string;
  readonly market: 'spot' | 'on-demand';
  /** vCPUs of one node: relaunch's catalog, else EC2's description; null when neither knows the type. */
  readonly vcpus: number | null;
  readonly nodes: number;
  /** true: it would launch now; false: something stops it (reasons); null: a check it needs could not be made. */
  readonly launchable: boolean | null;
  /** The places it would launch in (launchable), best first. */
  readonly places: readonly CandidatePlace[];
  /** Why it would not launch, or what could not be checked, place by place. */
  readonly reasons: readonly string[];
}

/** Would the task launch now, and on which candidates. */
export interface Verdict {
  /** Every task has a launchable candidate and nothing the task needs (its buckets) fails. */
  readonly launchable: boolean;
  readonly candidates: readonly CandidateVerdict[];
}

/** The whole report: `ok` is false when any check failed (exit status 1). */
export interface CheckReport {
  readonly ok: boolean;
  readonly checks: readonly CheckResult[];
  readonly verdict?: Verdict;
}

/** A report of these checks, `ok` when none failed. */
export function reportOf(checks: readonly CheckResult[], verdict?: Verdict): CheckReport {
  return { ok: checks.every((check) => check.status !== 'fail'), checks, ...(verdict === undefined ? {} : { verdict }) };
}
