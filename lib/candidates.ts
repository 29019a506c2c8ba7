// The instance types a task may launch on, in the order launches prefer them: what
// `relaunch validate --json` lists as candidates and `relaunch check` judges against an account.

import { PrecheckError } from './errors.ts';
import { instanceTypeInfo, type GpuCount } from './instance-types.ts';
import { instanceTypesFor, resourceChoices } from './launch-plan.ts';
import type { Market } from './policy/types.ts';
import type { SpecWarning, TaskSpec } from './task-file/types.ts';

/** An instance type a task may launch on, as `validate --json` shows it. */
export interface Candidate {
  readonly instanceType: string;
  /** null for a type relaunch's catalog does not describe (one named with instance_type). */
  readonly vcpus: number | null;
  readonly memoryGib: number | null;
  readonly gpus: GpuCount | null;
  readonly market: Market;
  /** With `any_of`/`ordered`: the entry (0-based) this candidate comes from. */
  readonly entry?: number;
  /** Set when the task or its entry names a region (and a zone): the candidate runs only there. */
  readonly region?: string;
  readonly zone?: string;
}

/**
 * The instance types the task's resources allow, from relaunch's catalog (a deployment's
 * allowed types may narrow them further), in the order launches prefer them: for each
 * `any_of`/`ordered` entry (lib/launch-plan.ts resourceChoices, on the task's first market)
 * its types, with the entry's market and place. An entry with no fitting type is a
 * warning (it would never launch); none at all, a warning that the launch would end
 * FAILED_PRECHECKS.
 */
export function candidatesOf(spec: TaskSpec, path: string): { candidates: Candidate[]; warnings: SpecWarning[] } {
  const market: Market = spec.resources.useSpot ? 'spot' : 'on-demand';
  const mode = spec.resources.alternatives?.mode;
  const candidates: Candidate[] = [];
  const problems: { path: string; message: string }[] = [];
  const seen = new Set<string>();
  for (const choice of resourceChoices(spec.resources, market)) {
    let types: string[];
    try {
      types = instanceTypesFor(choice.resources);
    } catch (error) {
      if (!(error instanceof PrecheckError)) throw error;
      problems.push({ path: choice.entry === null ? path : `${path}.${mode}[${choice.entry}]`, message: error.message.replace(/^resources: /, '') });
      continue;
    }
    const { region, zone } = choice.resources;
    for (const instanceType of types) {
      const key = [instanceType, choice.market, region, zone].join('|');
      if (seen.has(key)) continue;
      seen.add(key);
      const info = instanceTypeInfo(instanceType);
      candidates.push({
        instanceType,
        vcpus: info?.vcpus ?? null,
        memoryGib: info?.memoryGib ?? null,
        gpus: info?.gpu ?? null,
        market: choice.market,
        ...(choice.entry === null ? {} : { entry: choice.entry }),
        ...(region === null ? {} : { region }),
        ...(zone === null ? {} : { zone }),
      });
    }
  }
  const outcome = candidates.length === 0 ? 'a launch would end FAILED_PRECHECKS' : 'that entry would never launch';
  const unknown = [...new Set(candidates.filter((candidate) => candidate.vcpus === null).map((candidate) => candidate.instanceType))];
  return {
    candidates,
    warnings: [
      ...problems.map((problem) => ({ path: problem.path, message: `${problem.message}; ${outcome}` })),
      ...unknown.map((instanceType) => ({
        path,
        message: `${instanceType} is not a type relaunch knows (a typo, or one newer than its catalog): it is asked for in a request of its own, after the others, and EC2 may refuse it`,
      })),
    ],
  };
}
