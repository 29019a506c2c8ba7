// A job's account in words, for `relaunch status JOB`, the job-ended notice and the report:
// the summary line and the breakdown by cause.

import { LOST_CAUSES, TIME_CAUSES, type TimeCause } from './account.ts';
import { launchPriceOf } from './prices.ts';
import type { AccountView, CostView } from './view.ts';

/** How each cause reads in the breakdown. */
export const CAUSE_WORDS: Readonly<Record<TimeCause, string>> = {
  useful: 'useful run',
  preempted: 'lost to preemptions',
  lost: 'lost to lost instances',
  restarted: 'lost to restarts on exit codes',
  failed: 'lost to failed runs',
  cancelled: 'lost to the cancel',
  running: 'running',
  boot: 'boot',
  agent: 'agent steps',
  setup: 'setup',
  standby: 'standby holding',
  capacity: 'waiting for capacity',
  backoff: 'backoff',
  queued: 'queued before launch',
  controller: 'controller',
};

/** Dollars: cents from $1, four decimals from $0.001, six below (a short job would read $0.0000). */
export function usd(dollars: number): string {
  if (dollars >= 1) return `$${dollars.toFixed(2)}`;
  return dollars >= 0.001 ? `$${dollars.toFixed(4)}` : `$${dollars.toFixed(6)}`;
}

/** Seconds as `1h02m`, `3m05s`, or `12.5s`. */
export function span(seconds: number): string {
  if (seconds < 60) return `${seconds.toFixed(1)}s`;
  const whole = Math.round(seconds);
  if (whole < 3600) return `${Math.floor(whole / 60)}m${String(whole % 60).padStart(2, '0')}s`;
  return `${Math.floor(whole / 3600)}h${String(Math.floor((whole % 3600) / 60)).padStart(2, '0')}m`;
}

/** `$41.20 spot ($128.70 on demand)`, marked when estimated; null when nothing was priced. */
export function costWords(cost: CostView): string | null {
  if (cost.dollars === null) return null;
  const market = cost.market === 'on-demand' ? 'on demand' : (cost.market ?? 'spot');
  const beside = cost.market === 'on-demand' || cost.onDemandDollars === null ? '' : ` (${usd(cost.onDemandDollars)} on demand)`;
  return `${cost.estimate ? '~' : ''}${usd(cost.dollars)} ${market}${beside}${cost.estimate ? ', estimated' : ''}`;
}

/** `goodput 91% · 3 recoveries · $41.20 spot ($128.70 on demand)`. */
export function summaryLine(account: AccountView): string {
  const goodput = account.goodput === null ? 'goodput -' : `goodput ${Math.round(account.goodput * 100)}%`;
  const recoveries = `${account.recoveries} ${account.recoveries === 1 ? 'recovery' : 'recoveries'}`;
  const cost = costWords(account.cost);
  return [goodput, recoveries, ...(cost === null ? [] : [cost])].join(' · ');
}

/** The breakdown: the wall time by cause (those with time), the instance-hours, the controller. */
export function breakdownLines(account: AccountView): string[] {
  const wall = account.wallSeconds;
  const share = (seconds: number) => (wall > 0 ? ` (${Math.round((seconds / wall) * 100)}%)` : '');
  const causes = TIME_CAUSES.filter((cause) => account.seconds[cause] > 0);
  const lost = LOST_CAUSES.reduce((sum, cause) => sum + account.seconds[cause], 0);
  const lines = [
    `wall time ${span(wall)}${account.ended ? '' : ` so far (as of ${account.asOf})`}; run time lost ${span(lost)}`,
    ...causes.map((cause) => `  ${CAUSE_WORDS[cause].padEnd(32)} ${span(account.seconds[cause]).padStart(8)}${share(account.seconds[cause])}`),
    `instance-hours ${account.instanceHours.toFixed(3)} used, ${account.usefulInstanceHours.toFixed(3)} useful${account.instanceRatio === null ? '' : ` (${account.instanceRatio.toFixed(2)}x)`}${account.standbyInstanceHours > 0 ? `, ${account.standbyInstanceHours.toFixed(3)} on standbys` : ''}`,
    `controller ${usd(account.cost.controllerDollars)} (Step Functions, Lambda, DynamoDB, API; estimated)`,
  ];
  if (account.cost.unpriced.length > 0) lines.push(`no price for ${account.cost.unpriced.join(', ')}: left out of the cost`);
  return lines;
}

/** The section `relaunch status JOB` prints under the attempts. */
export function accountLines(account: AccountView | undefined): string[] {
  if (account === undefined) return [];
  return ['', summaryLine(account), ...breakdownLines(account)];
}

/** How many candidates `relaunch validate` prices before it says how many more there are. */
const PRICED_CANDIDATES = 8;

/**
 * `relaunch validate`'s price rows: one per candidate type and market, per instance-hour,
 * from the package's table (us-east-1 unless the candidate names a region); spot is the
 * table's estimate, the price EC2 charges being read only at launch.
 */
export function candidatePriceLines(candidates: readonly { readonly instanceType: string; readonly market: 'spot' | 'on-demand'; readonly region?: string }[], indent: string): string[] {
  const seen = new Set<string>();
  const lines: string[] = [];
  for (const candidate of candidates) {
    const region = candidate.region ?? 'us-east-1';
    const key = `${candidate.instanceType} ${candidate.market} ${region}`;
    if (seen.has(key)) continue;
    seen.add(key);
    const price = launchPriceOf(candidate.instanceType, region, candidate.market);
    const where = candidate.region === undefined ? '' : ` in ${region}`;
    if (price.hourly === null || price.onDemandHourly === null) {
      lines.push(`${candidate.instanceType}${where}: not in the price table`);
    } else if (candidate.market === 'spot') {
      lines.push(`${candidate.instanceType}${where}: ~${usd(price.hourly)} spot (estimated), ${usd(price.onDemandHourly)} on demand`);
    } else {
      lines.push(`${candidate.instanceType}${where}: ${usd(price.onDemandHourly)} on demand`);
    }
  }
  const shown = lines.slice(0, PRICED_CANDIDATES);
  if (lines.length > shown.length) shown.push(`and ${lines.length - shown.length} more`);
  return shown.map((line, index) => `${index === 0 ? 'price/hour'.padEnd(indent.length - 2) : ' '.repeat(indent.length - 2)}  ${line}`).map((line) => `  ${line}`);
}
