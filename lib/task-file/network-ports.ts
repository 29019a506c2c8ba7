// resources.ports and resources.network_tier: what a job's nodes expose, and how fast they talk.

import type { InputIssue } from '../errors.ts';
import type { NetworkTier, PortRange, TaskSpec } from './types.ts';
import { fromParser, type Report } from '../located-yaml/fields.ts';
import { expectedGot } from '../located-yaml/messages.ts';

const ONE_PORT = 'a port 1-65535 such as 8080, or a range such as "8080-8090"';
const PORT_TEXT = /^\s*(\d{1,5})\s*(?:-\s*(\d{1,5})\s*)?$/;

function isPort(value: number): boolean {
  return Number.isInteger(value) && value >= 1 && value <= 65_535;
}

function oneRange(value: unknown, report: Report): PortRange | undefined {
  if (typeof value === 'number') return isPort(value) ? { from: value, to: value } : report(expectedGot(ONE_PORT, value));
  if (typeof value !== 'string') return report(expectedGot(ONE_PORT, value));
  const match = PORT_TEXT.exec(value);
  if (match === null) return report(expectedGot(ONE_PORT, value));
  const from = Number(match[1]);
  const to = match[2] === undefined ? from : Number(match[2]);
  if (!isPort(from) || !isPort(to) || to < from) return report(expectedGot(`${ONE_PORT}, low to high`, value));
  return { from, to };
}

/** Sorted, with overlapping and touching ranges joined: `[8081, 8080, "8082-8085"]` is 8080-8085. */
export function mergePortRanges(ranges: readonly PortRange[]): PortRange[] {
  const merged: PortRange[] = [];
  for (const range of [...ranges].sort((a, b) => a.from - b.from)) {
    const last = merged.at(-1);
    if (last !== undefined && range.from <= last.to + 1) merged[merged.length - 1] = { from: last.from, to: Math.max(last.to, range.to) };
    else merged.push(range);
  }
  return merged;
}

/** A port range as SkyPilot writes it: `8080` or `8080-8090`. */
export function formatPortRange(range: PortRange): string {
  return range.from === range.to ? String(range.from) : `${range.from}-${range.to}`;
}

/** Whether every port of `wanted` lies in one of `allowed`'s ranges. */
export function portsWithin(wanted: readonly PortRange[], allowed: readonly PortRange[]): boolean {
  return wanted.every((range) => allowed.some((open) => open.from <= range.from && range.to <= open.to));
}

/**
 * The ports a task asks for that the deployment does not open (the relaunch:jobPorts context key),
 * as one issue under `resources.ports`; none when all are open. The API refuses such a task
 * at submit, and the launcher before it launches anything.
 */
export function portProblems(spec: TaskSpec, open: readonly PortRange[]): InputIssue[] {
  const wanted = spec.resources.ports ?? [];
  if (wanted.length === 0 || portsWithin(wanted, open)) return [];
  const opened = open.length === 0 ? 'none' : open.map(formatPortRange).join(', ');
  return [
    {
      path: 'resources.ports',
      message: `${wanted.map(formatPortRange).join(', ')} ${wanted.length === 1 ? 'is' : 'are'} not open on relaunch's job instances (this deployment opens ${opened}; see the relaunch:jobPorts context key)`,
    },
  ];
}

/** `resources.ports`: SkyPilot's one port, range string, or a list of them; merged and sorted. */
export const portsSchema = fromParser<readonly PortRange[]>((value, report) => {
  if (!Array.isArray(value)) {
    const one = oneRange(value, report);
    return one === undefined ? undefined : [one];
  }
  if (value.length === 0) return report(expectedGot(`${ONE_PORT}, or a list of them`, value));
  let failed = false;
  const ranges = value.flatMap((item, index) => {
    const range = oneRange(item, (message) => {
      failed = true;
      return report(message, [index]);
    });
    return range === undefined ? [] : [range];
  });
  return failed ? undefined : mergePortRanges(ranges);
});

const NETWORK_TIERS: readonly NetworkTier[] = ['standard', 'best'];

/** `resources.network_tier`: `standard` or `best`, in any case. */
export const networkTierSchema = fromParser<NetworkTier>((value, report) => {
  const tier = typeof value === 'string' ? value.toLowerCase() : undefined;
  if (tier !== undefined && (NETWORK_TIERS as readonly string[]).includes(tier)) return tier as NetworkTier;
  return report(expectedGot('standard or best (best: EFA on instance types that have it)', value));
});
