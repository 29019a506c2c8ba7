// Driving the real `relaunch` binary from tests: spawn it, wait for its output, its exit,
// files and processes, with no fixed sleeps; every process a test starts is ended by id.

import type { Io } from '../../cli/exit.ts';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { waitFor, WAIT_LIMIT_MS } from './fixtures/wait.ts';
import { fileURLToPath } from 'node:url';
import { serverInfoPath, type ServerInfo } from '../../local/server-info.ts';

export const BIN = fileURLToPath(new URL('../../cli/bin.js', import.meta.url));
export const EXAMPLES = fileURLToPath(new URL('../../examples/', import.meta.url));

/**
 * Whether this checkout's CLI can be run as nobody (setpriv, as root): a clone under a 0700
 * folder is out of nobody's reach, and a test that runs the CLI as another user says so.
 */
export const NOBODY_REACHES_CLI = spawnSync('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', 'test', '-r', BIN]).status === 0;

/** How a CLI process ended, with everything it wrote. */
export interface Finished {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** A running `relaunch` process. */
export interface Cli {
  readonly child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves when the process has exited and its streams are drained. */
  readonly finished: Promise<Finished>;
}

/**
 * The environment of a spawned CLI: no API URL or data folder leaks in from the shell; the
 * user's default data folder is one of the test's own (`stateHome`, never the real
 * user's), and a background runtime exits 3 s after its last job and caller.
 */
function cliEnv(cwd: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, XDG_STATE_HOME: stateHome(cwd), RELAUNCH_IDLE_EXIT_SECONDS: '3' };
  delete env.RELAUNCH_API_URL;
  delete env.RELAUNCH_DATA_DIR;
  return env;
}

const spawned = new Set<ChildProcess>();

/** Starts `node cli/bin.js ...args` in `cwd`, with `env` added to its environment. */
export function startCli(args: readonly string[], options: { cwd: string; env?: NodeJS.ProcessEnv }): Cli {
  const child = spawn(process.execPath, [BIN, ...args], { cwd: options.cwd, env: { ...cliEnv(options.cwd), ...options.env }, stdio: ['ignore', 'pipe', 'pipe'] });
  spawned.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const finished = new Promise<Finished>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code, signal) => {
      spawned.delete(child);
      resolve({ code, signal, stdout, stderr });
    });
  });
  return { child, stdout: () => stdout, stderr: () => stderr, finished };
}

/** Runs the CLI to its end. */
export function runCli(args: readonly string[], options: { cwd: string; env?: NodeJS.ProcessEnv }): Promise<Finished> {
  return startCli(args, options).finished;
}

/** Kills (by pid) every CLI process the tests started that is still running (call once all tests are done). */
export function killStrayClis(): void {
  for (const child of spawned) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  spawned.clear();
}


/** Waits until the process has written a line matching `pattern` on stdout; fails early if it exits. */
export function waitForOutput(cli: Cli, pattern: RegExp, timeoutMs = WAIT_LIMIT_MS): Promise<RegExpMatchArray> {
  let exited = false;
  void cli.finished.then(() => (exited = true));
  return waitFor(`stdout to match ${pattern}`, () => {
    const match = cli.stdout().match(pattern);
    if (match !== null) return match;
    if (exited) throw new Error(`exited before printing ${pattern}; stdout: ${cli.stdout()} stderr: ${cli.stderr()}`);
    return undefined;
  }, timeoutMs);
}

/** A fresh folder (cwd and data folder of one test), removed by `removeTempDirs`. */
const temps: string[] = [];

/**
 * The XDG state folder of CLIs run in `cwd`: beside it, not in it (a project run with
 * `workdir: .` would pack it), and removed with the temporary folders. The user's default
 * data folder is its `relaunch/`.
 */
export function stateHome(cwd: string): string {
  const home = `${cwd.replace(/\/+$/, '')}.state`;
  if (!temps.includes(home)) temps.push(home);
  return home;
}
export async function tempDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `relaunch-${prefix}-`));
  temps.push(dir);
  return dir;
}

export async function removeTempDirs(): Promise<void> {
  await Promise.all(temps.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
}

/** Writes a task file into `dir` and returns its path. */
export async function writeTask(dir: string, name: string, yaml: string): Promise<string> {
  const file = join(dir, name);
  await writeFile(file, yaml);
  return file;
}

/** The pid a job wrote (`echo $$ > file`), once the file holds one. */
export function waitForPid(file: string, timeoutMs = WAIT_LIMIT_MS): Promise<number> {
  return waitFor(`a pid in ${file}`, () => {
    if (!existsSync(file)) return undefined;
    const text = readFileSync(file, 'utf8').trim();
    return /^[0-9]+$/.test(text) ? Number(text) : undefined;
  }, timeoutMs);
}

/**
 * True while a process (or, with a negative id, a process group) exists. A zombie (ended,
 * not yet reaped by its parent) counts as gone: it runs nothing any more.
 */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw error;
  }
  return pid < 0 || procState(pid) !== 'Z';
}

/** The process group of a live process, from /proc (Linux). */
export function processGroupOf(pid: number): number {
  const fields = procStat(pid);
  if (fields === undefined) throw new Error(`no process ${pid}`);
  return Number(fields[2]);
}

/**
 * The processes of a group that still run (zombies aside), from /proc (Linux). Killed
 * orphans linger as zombies until init reaps them, so `kill(-pgid, 0)` alone would say
 * the group lives on.
 */
export function liveMembersOf(pgid: number): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^[0-9]+$/.test(entry))
    .map(Number)
    .filter((pid) => {
      const fields = procStat(pid);
      return fields !== undefined && Number(fields[2]) === pgid && fields[0] !== 'Z';
    });
}

/** Waits until no process of the group runs (a killed process takes a moment to die). */
export function waitForGroupGone(pgid: number, timeoutMs = 10_000): Promise<true> {
  return waitFor(`process group ${pgid} to end`, () => (liveMembersOf(pgid).length === 0 ? true : undefined), timeoutMs);
}

function procState(pid: number): string | undefined {
  return procStat(pid)?.[0];
}

/** The fields of /proc/<pid>/stat after the command name: state, ppid, pgrp, ... */
function procStat(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/** `<dataDir>/server.json`, or undefined when no server has recorded itself. */
export function serverInfo(dataDir: string): ServerInfo | undefined {
  const file = serverInfoPath(dataDir);
  if (!existsSync(file)) return undefined;
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as ServerInfo;
  } catch {
    return undefined; // being written
  }
}

/** Ends a background server a test caused to start, by its recorded pid, if it still runs. */
export function stopServer(info: ServerInfo | undefined): void {
  if (info !== undefined && isAlive(info.pid)) process.kill(info.pid, 'SIGKILL');
}

/** Parses all of stdout as one JSON value (fails the test with the text when it is not). */
export function parseStdout<T = unknown>(result: Finished): T {
  try {
    return JSON.parse(result.stdout) as T;
  } catch {
    throw new Error(`stdout is not one JSON value:\n${result.stdout}\nstderr:\n${result.stderr}`);
  }
}

/** The timeout of a test that runs the CLI: each start loads the runtime (seconds of CPU), and tests share two cores. */
export const SLOW = 120_000;

/** An Io that keeps what a command printed, for commands run in this process. */
export function bufferIo(): Io & { stdout: string[]; stderr: string[] } {
  const stdout: string[] = [];
  const stderr: string[] = [];
  return { stdout, stderr, out: (text) => stdout.push(text), err: (text) => stderr.push(text) };
}

export { waitFor };

/**
 * Runs `relaunch ...args` in this process through main(), for a command whose output a test
 * reads after the process under test is done (a job's status or logs): the same command,
 * without the second or so of CPU a new process takes to start. Paths must be absolute.
 */
export async function runInProcess(args: readonly string[]): Promise<Finished> {
  const { main } = await import('../../cli/main.ts');
  const io = bufferIo();
  const code = await main(['node', 'relaunch', ...args], io);
  const text = (lines: string[]) => lines.map((line) => (line.endsWith('\n') ? line : `${line}\n`)).join('');
  return { code, signal: null, stdout: text(io.stdout), stderr: text(io.stderr) };
}

/** Docker Hub's answer to a pull past its rate limit. */
export const PULL_RATE_LIMITED = 'toomanyrequests: You have reached your pull rate limit';

/**
 * A `docker` on PATH (the returned PATH): every call appended to $DOCKER_LOG; `info` fails
 * as with no daemon unless `usable`; the first `pullFailures` pulls are rate limited;
 * `exec` runs its command on this machine with IN_CONTAINER=yes.
 */
export function standInDocker(dir: string, options: { usable?: boolean; pullFailures?: number } = {}): string {
  const info = options.usable === false ? "echo 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock' >&2; exit 1" : 'echo 28.2.2';
  const script = `#!/bin/bash
printf '%s\\n' "$*" >> "$DOCKER_LOG"
case "$1" in
  info) ${info} ;;
  # A fresh daemon's: it holds no image, so the agent pulls (image inspect fails, as docker's does).
  image) echo "Error: No such image: $3" >&2; exit 1 ;;
  pull)
    pulls=$(grep -c '^pull ' "$DOCKER_LOG")
    if [ "$pulls" -le ${options.pullFailures ?? 0} ]; then echo "${PULL_RATE_LIMITED}" >&2; exit 1; fi
    echo "pulled $2" ;;
  run)
    # As docker does: two mounts at one destination are refused.
    dests=$(for arg in "$@"; do case $prev in -v) dest=\${arg#*:}; printf '%s\\n' "\${dest%%:*}" ;; esac; prev=$arg; done | sort | uniq -d | head -n 1)
    if [ -n "$dests" ]; then echo "docker: Error response from daemon: Duplicate mount point: $dests" >&2; exit 125; fi ;;
  exec)
    shift; workdir=''
    while [ "$#" -gt 0 ]; do case "$1" in -i) shift ;; -w) workdir=$2; shift 2 ;; -e) shift 2 ;; *) break ;; esac; done
    shift
    cd "$workdir" && exec env IN_CONTAINER=yes "$@" ;;
esac
`;
  const file = join(dir, 'docker');
  writeFileSync(file, script);
  chmodSync(file, 0o755);
  return [dir, process.env.PATH].join(delimiter);
}
