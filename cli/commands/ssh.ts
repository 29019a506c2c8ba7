// `relaunch ssh JOB [--attempt N] [--node N] [-- COMMAND...]`: a shell on one node of a
// running attempt. On AWS, a Session Manager session on the node's instance (`aws ssm
// start-session`, run as a child with this terminal); locally, a shell in the node's
// working folder with the environment its agent gave the job.

import { spawn, spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { InvalidInputError } from '../../lib/errors.ts';
import { isTerminal } from '../../lib/status.ts';
import { WORKDIR_PATH } from '../../lib/task-file/mounts.ts';
import type { AttemptView, InstanceView, JobView } from '../../lib/views.ts';
import { jobWorkDir, nodeDir, nodeDiskDir, servesAttempt } from '../../local/paths.ts';
import { openTarget, withTargetOptions, type Target, type TargetOptions } from '../context.ts';
import { exitWith, ExitStatus, reportError, subcommand, type Io } from '../exit.ts';
import { jobRefArgument, resolveJob, type JobRef } from '../job-id.ts';

interface SshOptions extends TargetOptions {
  readonly attempt?: number;
  readonly node?: number;
}

/** Where AWS says to get what `aws ssm start-session` needs. */
export const AWS_CLI_INSTALL = 'https://docs.aws.amazon.com/cli/latest/userguide/getting-started-install.html';
export const SESSION_PLUGIN_INSTALL = 'https://docs.aws.amazon.com/systems-manager/latest/userguide/session-manager-working-with-install-plugin.html';

/** An EC2 instance id; anything else is the local runtime's stand-in. */
const EC2_INSTANCE_ID = /^i-[0-9a-f]{8,17}$/;

/** The `ssh` subcommand. */
export function sshCommand(io: Io): Command {
  return withTargetOptions(
    subcommand('ssh', io)
      .description("open a shell on a node of a job's running attempt: Session Manager on AWS, the node's working folder locally")
      .argument('<job>', 'a job id, or a job name (the newest job of that name)', jobRefArgument)
      .argument('[command...]', 'after --: a command to run in the shell instead of an interactive one')
      .option('--attempt <n>', 'the attempt (1-based; default: the latest)', whole('--attempt', 1))
      .option('--node <n>', 'the node rank (default: 0, the head)', whole('--node', 0)),
  ).action(async (ref: JobRef, command: string[], options: SshOptions) => exitWith(await ssh(ref, command, options, io)));
}

async function ssh(ref: JobRef, command: readonly string[], options: SshOptions, io: Io): Promise<ExitStatus> {
  let target: Target | null = null;
  let node: NodeOfJob;
  let dataDir: string | null;
  let jobId: string;
  try {
    target = await openTarget(options, io, { command: 'ssh' });
    jobId = await resolveJob(ref, target.client, { live: true });
    dataDir = target.client.dataDir;
    node = nodeOf(await target.client.getJob(jobId), options.attempt, options.node ?? 0);
  } catch (error) {
    return reportError(io, error);
  } finally {
    // Let go of the data folder before the shell: a session may last hours.
    await target?.close();
  }
  try {
    if (EC2_INSTANCE_ID.test(node.instance.instanceId)) return await sessionOnInstance(node, command, io);
    if (dataDir === null) {
      throw new InvalidInputError([{ path: '--api', message: `job ${jobId} runs on a local runtime (its node is ${node.instance.instanceId}): run relaunch ssh in that runtime's folder (--data-dir), not through its API` }]);
    }
    return await localShell(dataDir, jobId, node, command);
  } catch (error) {
    return reportError(io, error);
  }
}

/** The node a shell opens on, with its attempt. */
export interface NodeOfJob {
  readonly attempt: AttemptView;
  readonly instance: InstanceView;
}

/**
 * The node `--attempt` and `--node` name, when it is there to open a shell on: the job
 * runs, the attempt has not ended, and the launch placed that node.
 *
 * @throws InvalidInputError naming what is gone or out of range.
 */
export function nodeOf(job: JobView, attemptNumber: number | undefined, rank: number): NodeOfJob {
  const id = job.jobId;
  if (isTerminal(job.status)) {
    throw new InvalidInputError([{ path: '<job>', message: `job ${id} ended ${job.status}: its nodes are gone (relaunch logs ${id} shows what they wrote)` }]);
  }
  const latest = job.attempts.at(-1);
  if (latest === undefined) throw new InvalidInputError([{ path: '<job>', message: `job ${id} has no attempt yet (${job.status}): try again once it is launched` }]);
  const attempt = attemptNumber === undefined ? latest : job.attempts[attemptNumber - 1];
  if (attempt === undefined) throw new InvalidInputError([{ path: '--attempt', message: `expected 1-${job.attempts.length} (job ${id}'s attempts), got ${attemptNumber}` }]);
  if (attempt.endedAt !== null) {
    const live = job.attempts.filter((other) => other.endedAt === null).at(-1);
    const where = live === undefined ? '' : `; attempt ${live.attempt} runs now (relaunch ssh ${id} --attempt ${live.attempt})`;
    const ended = attempt.outcome === null ? 'ended' : `ended ${attempt.outcome}`;
    throw new InvalidInputError([{ path: '--attempt', message: `attempt ${attempt.attempt} of job ${id} ${ended}: its nodes are gone${where}` }]);
  }
  if (attempt.instances.length === 0) {
    throw new InvalidInputError([{ path: '--attempt', message: `attempt ${attempt.attempt} of job ${id} has no instance yet (it is launching): try again in a moment` }]);
  }
  const instance = attempt.instances.find((candidate) => candidate.nodeRank === rank);
  if (instance === undefined) {
    throw new InvalidInputError([{ path: '--node', message: `expected a node rank 0-${job.numNodes - 1} of attempt ${attempt.attempt}'s ${attempt.instances.length} placed, got ${rank}` }]);
  }
  return { attempt, instance };
}

/** `aws ssm start-session`'s arguments for a shell (or `command`, run in one) on the instance. */
export function startSessionArgs(instanceId: string, region: string, command: readonly string[]): string[] {
  const args = ['ssm', 'start-session', '--target', instanceId, '--region', region];
  if (command.length === 0) return args;
  return [...args, '--document-name', 'AWS-StartInteractiveCommand', '--parameters', JSON.stringify({ command: [command.join(' ')] })];
}

/** Whether `name` is an executable file in one of PATH's folders. */
function onPath(name: string): boolean {
  return (process.env.PATH ?? '').split(path.delimiter).some((folder) => {
    if (folder === '') return false;
    try {
      accessSync(path.join(folder, name), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/** A shell word, quoted only when it needs to be, for a command line to copy. */
function shellWord(word: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

/** The Session Manager session, with this terminal; the exact command and what to install when a tool is missing (exit 2). */
async function sessionOnInstance(node: NodeOfJob, command: readonly string[], io: Io): Promise<ExitStatus> {
  const region = node.attempt.placement?.region;
  if (region === undefined) throw new InvalidInputError([{ path: '--attempt', message: `attempt ${node.attempt.attempt} records no region for ${node.instance.instanceId}` }]);
  const args = startSessionArgs(node.instance.instanceId, region, command);
  const missing = [
    ...(onPath('aws') ? [] : [`the AWS CLI v2 (aws): ${AWS_CLI_INSTALL}`]),
    ...(onPath('session-manager-plugin') ? [] : [`the Session Manager plugin (session-manager-plugin): ${SESSION_PLUGIN_INSTALL}`]),
  ];
  if (missing.length > 0) {
    io.err(
      [
        'relaunch ssh opens a Session Manager session with the AWS CLI and its Session Manager plugin; not found on PATH here:',
        ...missing.map((line) => `  ${line}`),
        'Install it, then run (or run it yourself):',
        `  ${['aws', ...args].map(shellWord).join(' ')}`,
      ].join('\n'),
    );
    return ExitStatus.USAGE;
  }
  return runChild('aws', args, {});
}

/** A shell (or `command` in one) in the local node's working folder, with the job's environment as its agent wrote it. */
async function localShell(dataDir: string, jobId: string, node: NodeOfJob, command: readonly string[]): Promise<ExitStatus> {
  const { attempt } = node.attempt;
  const rank = node.instance.nodeRank;
  const root = nodeDir(dataDir, jobId, attempt, rank);
  const envFile = path.join(root, 'env.sh');
  // A node kept for the next attempt rewrites its env.sh when it moves to it: until then the
  // folder (a link to the one it was launched in) holds the attempt before's variables.
  if (!servesAttempt(dataDir, jobId, attempt, rank)) {
    throw new InvalidInputError([{ path: '--node', message: `node ${rank} of attempt ${attempt} is a node kept from the attempt before that has not moved to this one yet (its folder holds that attempt's variables): try again in a moment` }]);
  }
  if (!existsSync(envFile)) {
    throw new InvalidInputError([{ path: '--node', message: `node ${rank} of attempt ${attempt} has not started its agent yet (no ${envFile}): try again in a moment` }]);
  }
  // The task's own disk (a workdir or mounts): its home, and the workdir in it.
  const home = path.join(nodeDiskDir(dataDir, jobId, attempt, rank), 'home');
  const workdir = path.join(home, WORKDIR_PATH.replace(/^~\//, ''));
  const cwd = existsSync(workdir) ? workdir : jobWorkDir(dataDir, jobId);
  const variables = jobVariables(envFile);
  // The agent writes the job's variables first and the node's own (its rank, its peers) once it knows them.
  if (variables.RELAUNCH_NODE_RANK === undefined) {
    throw new InvalidInputError([{ path: '--node', message: `node ${rank} of attempt ${attempt} is still starting (its agent has not learned its rank yet): try again in a moment` }]);
  }
  const env = { ...process.env, ...variables, ...(existsSync(home) ? { HOME: home } : {}) };
  const shell = process.env.SHELL !== undefined && process.env.SHELL !== '' ? process.env.SHELL : 'bash';
  return runChild(shell, command.length === 0 ? [] : ['-c', command.join(' ')], { cwd, env });
}

/**
 * The variables the node's env.sh sets (the agent writes it from lib/job-env.ts's
 * jobEnvironment, plus the node's own rank and peers): bash sources it, and whatever
 * differs from bash's own environment is the job's.
 */
function jobVariables(envFile: string): Record<string, string> {
  const read = (script: string) => {
    const result = spawnSync('bash', ['--noprofile', '--norc', '-c', script, 'relaunch-ssh', envFile], { env: { PATH: process.env.PATH ?? '' }, encoding: 'utf8' });
    if (result.status !== 0) throw new Error(`could not read ${envFile}: ${result.stderr.trim() || `bash exited ${result.status}`}`);
    return new Map(result.stdout.split('\0').filter((entry) => entry.includes('=')).map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)] as const));
  };
  const plain = read('env -0');
  const sourced = read('. "$1" >/dev/null && env -0');
  return Object.fromEntries([...sourced].filter(([name, value]) => plain.get(name) !== value));
}

/** Runs a program with this terminal; Ctrl-C goes to it, not to relaunch. 0 when it exits 0, else 1. */
function runChild(program: string, args: readonly string[], options: { cwd?: string; env?: NodeJS.ProcessEnv }): Promise<ExitStatus> {
  const ignore = (): void => undefined;
  process.on('SIGINT', ignore);
  process.on('SIGQUIT', ignore);
  return new Promise<ExitStatus>((resolve, reject) => {
    const child = spawn(program, args, { stdio: 'inherit', ...options });
    child.once('error', (error) => reject(new Error(`could not start ${program}: ${error.message}`)));
    child.once('close', (code) => resolve(code === 0 ? ExitStatus.OK : ExitStatus.JOB_FAILED));
  }).finally(() => {
    process.off('SIGINT', ignore);
    process.off('SIGQUIT', ignore);
  });
}

/** A whole-number option of at least `min` (`--attempt` from 1, `--node` from 0). */
function whole(option: string, min: number): (value: string) => number {
  return (value) => {
    if (!/^[0-9]{1,9}$/.test(value) || Number(value) < min) {
      throw new InvalidInputError([{ path: option, message: `expected a whole number from ${min}, got "${value.slice(0, 40)}"` }]);
    }
    return Number(value);
  };
}
