// `sky jobs launch`'s overrides of a task file (`--name`, `--num-nodes`, `--gpus`, `--cpus`,
// `--memory`, `--instance-type`, `--use-spot/--no-use-spot`), written into the file's text
// before it is checked and submitted: `validate` shows the task they make, and the job
// stores it as it stores any task.

import { Option, type Command } from 'commander';
import { isMap, isScalar, isSeq, parseAllDocuments, type Document } from 'yaml';
import { InvalidInputError, InvalidTaskSpecError, type InputIssue } from '../lib/errors.ts';
import { isPipelineHeader, parseJobFile, type ParsedJob } from '../lib/task-file/parse.ts';
import { readTaskFile } from './task-file.ts';

/** What the options override, each as the command line gave it. */
export interface LaunchOverrides {
  readonly name?: string;
  readonly numNodes?: number;
  readonly gpus?: string;
  readonly cpus?: string;
  readonly memory?: string;
  readonly instanceType?: string;
  readonly useSpot?: boolean;
}

/** Each override: its option, and the key it sets (under `resources` but for name and num_nodes). */
const FIELDS = [
  { option: 'name', flag: '--name', key: 'name', resource: false },
  { option: 'numNodes', flag: '--num-nodes', key: 'num_nodes', resource: false },
  { option: 'gpus', flag: '--gpus', key: 'accelerators', resource: true },
  { option: 'cpus', flag: '--cpus', key: 'cpus', resource: true },
  { option: 'memory', flag: '--memory', key: 'memory', resource: true },
  { option: 'instanceType', flag: '--instance-type', key: 'instance_type', resource: true },
  { option: 'useSpot', flag: '--use-spot', key: 'use_spot', resource: true },
] as const satisfies readonly { option: keyof LaunchOverrides; flag: string; key: string; resource: boolean }[];

/** Where an overridden key sits in the task: `num_nodes`, `resources.cpus`. */
function fieldPath(field: (typeof FIELDS)[number]): string {
  return field.resource ? `resources.${field.key}` : field.key;
}

/** Adds the override options to `run` or `validate`. */
export function withLaunchOverrideOptions(command: Command): Command {
  return command
    .option('-n, --name <name>', "the job's name, over the file's `name`")
    .option('--num-nodes <n>', 'how many nodes, over `num_nodes`', positiveInteger)
    .option('--gpus <accelerators>', 'accelerators, over `resources.accelerators` (A100:8, H100)')
    .option('--cpus <n>', 'vCPUs, over `resources.cpus` (4 exactly, 4+ at least)')
    .option('--memory <gb>', 'memory in GB, over `resources.memory` (32, 32+)')
    .option('--instance-type <type>', 'an EC2 instance type, over `resources.instance_type`')
    .addOption(new Option('--use-spot', 'spot instances, over `resources.use_spot`'))
    .addOption(new Option('--no-use-spot', 'on-demand instances, over `resources.use_spot`'));
}

function positiveInteger(value: string): number {
  if (!/^[1-9][0-9]*$/.test(value)) {
    throw new InvalidInputError([{ path: '--num-nodes', message: `expected a whole number of nodes, 1 or more, got "${value}"` }]);
  }
  return Number(value);
}

/** The overrides an options object holds (commander leaves the absent ones undefined). */
export function launchOverridesOf(options: LaunchOverrides): LaunchOverrides {
  return Object.fromEntries(FIELDS.filter(({ option }) => options[option] !== undefined).map(({ option }) => [option, options[option]]));
}

/**
 * The task file's text with the overrides written in, comments kept; the text as it was
 * when there are none. A resource key is set in `resources` and in every `any_of`/`ordered`
 * entry that sets it too, as SkyPilot applies an override to every candidate.
 *
 * @throws InvalidInputError for a pipeline (several tasks: which one an override means is
 *   not said; SkyPilot ignores them there, relaunch refuses rather than run what was not asked).
 */
export function applyLaunchOverrides(text: string, overrides: LaunchOverrides): string {
  const given = FIELDS.filter(({ option }) => overrides[option] !== undefined);
  if (given.length === 0) return text;
  const documents = parseAllDocuments(text) as Document[];
  const tasks = documents.filter((doc) => !(doc.contents === null || (isScalar(doc.contents) && doc.contents.value === null)));
  if (tasks.length > 1) {
    const taskCount = isPipelineHeader(tasks[0]?.toJS(), tasks.length) ? tasks.length - 1 : tasks.length;
    throw new InvalidInputError(
      given.map(({ flag }) => ({ path: flag, message: `expected a file of one task, got a pipeline of ${taskCount}: give the value in the task it is for` })),
    );
  }
  const [task] = tasks as [Document];
  for (const field of given) {
    const value = overrides[field.option] as string | number | boolean;
    if (!field.resource) {
      task.set(field.key, value);
      continue;
    }
    if (!isMap(task.get('resources'))) task.set('resources', task.createNode({}));
    task.setIn(['resources', field.key], value);
    for (const list of ['any_of', 'ordered']) {
      const entries = task.getIn(['resources', list]);
      if (!isSeq(entries)) continue;
      for (const entry of entries.items) if (isMap(entry) && entry.has(field.key)) entry.set(field.key, value);
    }
  }
  return documents.map((doc) => doc.toString()).join('');
}

/**
 * A problem of an overridden field named by its option too (`--cpus (resources.cpus)`),
 * so the user looks at the command line rather than the file.
 */
export function namingOverrides(error: unknown, overrides: LaunchOverrides): unknown {
  if (!(error instanceof InvalidTaskSpecError)) return error;
  const byPath = new Map(FIELDS.filter(({ option }) => overrides[option] !== undefined).map((field) => [fieldPath(field), field.flag]));
  if (byPath.size === 0) return error;
  const issues = error.issues.map((issue): InputIssue => {
    const flag = byPath.get(issue.path);
    if (flag === undefined) return issue;
    const { line: _line, ...rest } = issue;
    return { ...rest, path: `${flag} (${issue.path})` };
  });
  return new InvalidTaskSpecError(issues);
}

/**
 * The task file's text with the launch overrides written in, and the job it makes. The
 * file is checked as written first, so its own problems keep their line numbers; a
 * problem an override brings names the option.
 */
export async function readWithOverrides(file: string, overrides: LaunchOverrides): Promise<{ text: string; parsed: ParsedJob }> {
  const written = await readTaskFile(file);
  const asWritten = parseJobFile(written);
  const text = applyLaunchOverrides(written, overrides);
  if (text === written) return { text, parsed: asWritten };
  try {
    return { text, parsed: parseJobFile(text) };
  } catch (error) {
    throw namingOverrides(error, overrides);
  }
}
