// The task file's schema: which keys each section takes, and how they become a TaskSpec.

import * as z from '../zod.ts';
import { MAX_NUM_NODES } from '../report-tail.ts';
import { DISK_TIERS, type DiskTier, type ResourceAlternatives, type ResourceOption, type Resources, type TaskSpec } from './types.ts';
import { acceleratorsSchema } from './accelerators.ts';
import { envsSchema } from './envs.ts';
import { alsoInEnvs, secretsSchema, type SecretValues } from './secrets.ts';
import { flag, fromParser, integer, isMapping } from '../located-yaml/fields.ts';
import { imageIdSchema, imageProblems } from './image-id.ts';
import { MAX_NAME_LENGTH, taskTextProblem } from './limits.ts';
import { containerMountProblems, fileMountsSchema, workdirSchema } from './mounts.ts';
import { expected, expectedGot, type Problem } from '../located-yaml/messages.ts';
import type { Path } from '../located-yaml/path.ts';
import { cloudSchema, infraSchema, otherCloudOf, place, placementProblems, regionSchema, zoneSchema } from './cloud-region-zone.ts';
import { networkTierSchema, portsSchema } from './network-ports.ts';
import { cpusSchema, diskSizeSchema, memorySchema } from './quantity.ts';
import {
  DEFAULT_RECOVERY_POLICY,
  JOB_RECOVERY_KEYS,
  RESTART_BACKOFF_KEYS,
  jobRecoverySchema,
  recoveryProblems,
} from './recovery.ts';
import { unknownKeyMessage, type Section } from './unsupported.ts';

/** SkyPilot's task name rule: letters and digits, joined by up to two of `.`, `_`, `-`. */
export const TASK_NAME = /^[A-Za-z0-9]+(?:[._-]{1,2}[A-Za-z0-9]+)*$/;
/** An EC2 instance type: family, a dot, size (`p4d.24xlarge`, `m7i-flex.large`). */
const INSTANCE_TYPE = /^[a-z][a-z0-9-]*\.[a-z0-9-]+$/;

const nameSchema = fromParser<string>((value, report) => {
  if (typeof value === 'string' && value.length > MAX_NAME_LENGTH) {
    return report(`expected a name of at most ${MAX_NAME_LENGTH} characters, got ${value.length} characters`);
  }
  return typeof value === 'string' && TASK_NAME.test(value)
    ? value
    : report(expectedGot('a name of letters and digits joined by . _ or - (such as train-llama)', value));
});

/** `setup` and `run`: shell text a process can be given (no NUL); their size counts in the task's total. */
const scriptSchema = fromParser<string>((value, report) => {
  if (typeof value !== 'string') return report(expectedGot('shell commands as a string', value));
  if (value.includes('\0')) return report('expected shell commands without NUL characters, which no process argument can hold');
  return value;
});

const instanceTypeSchema = fromParser<string>((value, report) =>
  typeof value === 'string' && INSTANCE_TYPE.test(value)
    ? value
    : report(expectedGot('an EC2 instance type such as p4d.24xlarge', value)),
);

/** `disk_tier`: one of SkyPilot's tiers, in any case. */
const diskTierSchema = fromParser<DiskTier>((value, report) => {
  const tier = typeof value === 'string' ? value.toLowerCase() : undefined;
  if (tier !== undefined && (DISK_TIERS as readonly string[]).includes(tier)) return tier as DiskTier;
  return report(expectedGot(`one of ${DISK_TIERS.join(', ')}`, value));
});

/**
 * The keys an `any_of` or `ordered` entry takes: where, on what machine, on which market.
 * Anything else (disk, image, ports, recovery) is the task's whichever candidate runs it,
 * and is set once, outside the list.
 */
const candidateShape = {
  cloud: z.nullish(cloudSchema),
  infra: z.nullish(infraSchema),
  region: z.nullish(regionSchema),
  zone: z.nullish(zoneSchema),
  instance_type: z.nullish(instanceTypeSchema),
  cpus: z.nullish(cpusSchema),
  memory: z.nullish(memorySchema),
  accelerators: z.nullish(acceleratorsSchema),
  use_spot: z.nullish(flag('true or false')),
};

type GivenCandidate = z.output<z.ZodMiniObject<typeof candidateShape>>;

function toOption(given: GivenCandidate): ResourceOption {
  const placed = given.infra != null || given.region != null || given.zone != null;
  return {
    ...(placed ? place(given) : {}),
    ...(given.instance_type == null ? {} : { instanceType: given.instance_type }),
    ...(given.cpus == null ? {} : { cpus: given.cpus }),
    ...(given.memory == null ? {} : { memoryGb: given.memory }),
    ...(given.accelerators == null ? {} : { accelerators: given.accelerators }),
    ...(given.use_spot == null ? {} : { useSpot: given.use_spot }),
  };
}

const awsCandidateSchema = z.pipe(
  z.strictObject(candidateShape, { error: expected('a mapping of resources (cloud, region, accelerators, use_spot, ...)') }),
  z.transform(toOption),
);

/** An entry for another cloud: left out of the candidates (lib/task-file/warnings.ts says so). */
interface DroppedCandidate {
  readonly otherCloud: string;
}

/** One entry: an AWS candidate, or one for another cloud, whose other keys are that cloud's business. */
const candidateSchema = z.pipe(
  z.unknown(),
  z.transform((value, ctx): ResourceOption | DroppedCandidate => {
    const otherCloud = otherCloudOf(value);
    if (otherCloud !== null) return { otherCloud };
    const result = awsCandidateSchema.safeParse(value);
    if (result.success) return result.data;
    // The inner issues keep their codes and paths, so unknown keys are still worded by name.
    ctx.issues.push(...(result.error.issues as z.core.$ZodRawIssue[]));
    return z.NEVER;
  }),
);

const CANDIDATE_LIST = 'a list of resources mappings, such as [{accelerators: A100:8}, {use_spot: false}]';

/** `any_of` and `ordered`: a non-empty list of entries. */
const candidateListSchema = z.array(candidateSchema, { error: expected(CANDIDATE_LIST) }).check(z.minLength(1, { error: expected(CANDIDATE_LIST) }));

/** `resources`'s keys, in the file's spelling; a key with no value means the default. */
const resourcesShape = {
  ...candidateShape,
  disk_size: z.nullish(diskSizeSchema),
  disk_tier: z.nullish(diskTierSchema),
  image_id: z.nullish(imageIdSchema),
  job_recovery: z.nullish(jobRecoverySchema),
  /** SkyPilot's older name for job_recovery, read the same way (with a warning). */
  spot_recovery: z.nullish(jobRecoverySchema),
  any_of: z.nullish(candidateListSchema),
  ordered: z.nullish(candidateListSchema),
  ports: z.nullish(portsSchema),
  network_tier: z.nullish(networkTierSchema),
};

type GivenResources = z.output<z.ZodMiniObject<typeof resourcesShape>>;

/**
 * The AWS entries of `any_of` or `ordered` (whichever is given); undefined when neither is,
 * or none is on AWS, or both are given (crossFieldProblems reports those two).
 */
function alternativesOf(given: GivenResources): ResourceAlternatives | undefined {
  if (given.any_of != null && given.ordered != null) return undefined;
  const mode = given.ordered != null ? 'ordered' : 'any_of';
  const options = (given.ordered ?? given.any_of ?? []).flatMap((entry, index) => ('otherCloud' in entry ? [] : [{ index, ...entry }]));
  return options.length === 0 ? undefined : { mode, options };
}

function toResources(given: GivenResources): Resources {
  const { region, zone } = place(given);
  const outerSpot = given.use_spot ?? false;
  const found = alternativesOf(given);
  // Each entry's market is fixed here: the outer use_spot is not kept apart once useSpot
  // means "any candidate may use spot".
  const chosen = found && { ...found, options: found.options.map((option) => ({ ...option, useSpot: option.useSpot ?? outerSpot })) };
  const useSpot = chosen === undefined ? outerSpot : chosen.options.some((option) => option.useSpot);
  return {
    cloud: 'aws',
    region,
    zone,
    instanceType: given.instance_type ?? null,
    cpus: given.cpus ?? null,
    memoryGb: given.memory ?? null,
    accelerators: given.accelerators ?? [],
    useSpot,
    diskSizeGb: given.disk_size ?? null,
    ...(given.disk_tier == null ? {} : { diskTier: given.disk_tier }),
    imageId: given.image_id?.machine ?? null,
    ...(given.image_id?.container == null ? {} : { containerImage: given.image_id.container }),
    jobRecovery: given.job_recovery ?? given.spot_recovery ?? DEFAULT_RECOVERY_POLICY,
    ...(chosen === undefined ? {} : { alternatives: chosen }),
    ...(given.ports == null ? {} : { ports: given.ports }),
    ...(given.network_tier == null ? {} : { networkTier: given.network_tier }),
  };
}

const resourcesSchema = z.pipe(
  z.strictObject(resourcesShape, { error: expected('a mapping of resources (cloud, cpus, accelerators, ...)') }),
  z.transform(toResources),
);

/** The task's top-level keys, in the file's spelling. */
const taskShape = {
  name: z.nullish(nameSchema),
  workdir: z.nullish(workdirSchema),
  file_mounts: z.nullish(fileMountsSchema),
  // Bounded so an attempt's reports fit its one stored record (lib/report-tail.ts).
  num_nodes: z.nullish(integer(`an integer from 1 to ${MAX_NUM_NODES} (the most nodes relaunch runs a task on)`, 1, MAX_NUM_NODES)),
  envs: z.nullish(envsSchema),
  secrets: z.nullish(secretsSchema),
  setup: z.nullish(scriptSchema),
  run: z.nullish(scriptSchema),
  resources: z.nullish(resourcesSchema),
};

/** The keys each section accepts, for "unknown key" messages and suggestions. */
export const SUPPORTED_KEYS: Readonly<Record<Section, readonly string[]>> = {
  task: Object.keys(taskShape),
  resources: Object.keys(resourcesShape),
  job_recovery: JOB_RECOVERY_KEYS,
  restart_backoff: RESTART_BACKOFF_KEYS,
  candidate: Object.keys(candidateShape),
};

/** The whole task: a mapping of the supported keys, normalized into a TaskSpec and its secrets' values. */
export const taskSchema = z.pipe(
  z.strictObject(taskShape),
  z.transform((given, ctx): { spec: TaskSpec; secrets: SecretValues } => {
    const secrets = given.secrets ?? {};
    const names = Object.keys(secrets).sort();
    for (const problem of alsoInEnvs(names, given.envs ?? {})) {
      ctx.issues.push({ code: 'custom', message: problem.message, input: problem.path.at(-1), path: [...problem.path] });
    }
    const spec: TaskSpec = {
      name: given.name ?? null,
      workdir: given.workdir?.kind === 'path' ? given.workdir.path : null,
      ...(given.workdir?.kind === 'git' ? { gitWorkdir: given.workdir.git } : {}),
      ...(given.file_mounts == null || given.file_mounts.length === 0 ? {} : { fileMounts: given.file_mounts }),
      numNodes: given.num_nodes ?? 1,
      envs: given.envs ?? {},
      setup: given.setup ?? null,
      run: given.run ?? null,
      resources: given.resources ?? toResources({}),
      ...(names.length === 0 ? {} : { secretNames: names }),
    };
    for (const problem of containerMountProblems(spec.fileMounts ?? [], spec.resources.containerImage)) {
      ctx.issues.push({ code: 'custom', message: problem.message, input: problem.path.at(-1), path: problem.path });
    }
    const tooLarge = taskTextProblem(spec);
    if (tooLarge !== undefined) ctx.issues.push({ code: 'custom', message: tooLarge, input: given, path: [] });
    return { spec, secrets };
  }),
);

/** Which section a strict mapping at this path is (only five kinds of mapping are strict). */
function sectionAt(path: Path): Section {
  const last = path.at(-1);
  if (last === undefined) return 'task';
  if (typeof last === 'number' && (path.at(-2) === 'any_of' || path.at(-2) === 'ordered')) return 'candidate';
  if (last === 'resources' || last === 'restart_backoff') return last;
  return 'job_recovery';
}

/** A zod issue as problems: one per unrecognized key, worded by what the key is. */
export function problemsOfIssue(issue: z.core.$ZodIssue): Problem[] {
  const path = issue.path as Path;
  if (issue.code !== 'unrecognized_keys') return [{ path, message: issue.message }];
  const section = sectionAt(path);
  return issue.keys.map((key) => ({ path: [...path, key], message: unknownKeyMessage(section, key, SUPPORTED_KEYS) }));
}

function under(prefix: Path, problems: readonly Problem[]): Problem[] {
  return problems.map((problem) => ({ path: [...prefix, ...problem.path], message: problem.message }));
}

/**
 * Checks across fields, run on the raw task whatever else is wrong with it, so that one
 * pass reports everything: placement and image against region, job_recovery's lists
 * against each other, and job_recovery against its older name.
 */
export function crossFieldProblems(task: Readonly<Record<string, unknown>>): Problem[] {
  const resources = task.resources;
  if (!isMapping(resources)) return [];
  const problems = under(['resources'], [...placementProblems(resources), ...imageProblems(resources)]);
  if (resources.job_recovery != null && resources.spot_recovery != null) {
    problems.push({
      path: ['resources', 'spot_recovery'],
      message: 'expected job_recovery or its older name spot_recovery, got both',
    });
  }
  for (const key of ['job_recovery', 'spot_recovery']) {
    problems.push(...under(['resources', key], recoveryProblems(resources[key])));
  }
  if (resources.any_of != null && resources.ordered != null) {
    problems.push({ path: ['resources', 'ordered'], message: 'expected any_of or ordered, got both' });
  }
  for (const key of ['any_of', 'ordered']) {
    const entries = resources[key];
    if (!Array.isArray(entries)) continue;
    const clouds = entries.map(otherCloudOf);
    if (entries.length > 0 && clouds.every((cloud) => cloud !== null)) {
      const named = [...new Set(clouds)].join(', ');
      problems.push({ path: ['resources', key], message: `expected at least one entry on AWS (relaunch runs on AWS only), got only ${named}` });
    }
    entries.forEach((entry, index) => {
      if (isMapping(entry) && otherCloudOf(entry) === null) problems.push(...under(['resources', key, index], placementProblems(entry)));
    });
  }
  return problems;
}
