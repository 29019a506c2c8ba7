// A real Docker daemon for the tests that run containers: Debian's docker.io started as root
// with no bridge and no iptables (../shared/TOOLING.md), on a socket and folders of its own;
// small images imported from a root filesystem made of this machine's Debian bash and
// busybox-static (no registry of the internet is reachable); Debian's docker-registry on
// 127.0.0.1 with htpasswd auth; and a proxy in front of it that answers 429. `.ci/run`
// installs the packages; where they or root are missing, `dockerUnavailable` says why.

import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest, type Server } from 'node:http';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { waitFor } from './fixtures/wait.ts';

const DOCKERD = '/usr/sbin/dockerd';
/** The client Debian's docker.io installs beside its daemon (another one on PATH may be newer than the daemon speaks). */
const DOCKER = '/usr/bin/docker';
const BUSYBOX = '/bin/busybox';
const REGISTRY = '/usr/bin/docker-registry';
const HTPASSWD = '/usr/bin/htpasswd';

/** Why no daemon can run here (what to install, or root missing), or null when one can. */
export function dockerUnavailable(): string | null {
  if (process.getuid?.() !== 0) return 'dockerd needs root, as CI has';
  for (const [file, pkg] of [
    [DOCKERD, 'docker.io'],
    [DOCKER, 'docker.io'],
    [BUSYBOX, 'busybox-static'],
    [REGISTRY, 'docker-registry'],
    [HTPASSWD, 'apache2-utils'],
  ] as const) {
    if (!existsSync(file)) return `${file} is missing: apt-get install -y --no-install-recommends ${pkg} (.ci/run does)`;
  }
  return null;
}

/** A daemon of the test's own: its socket, a folder with a `docker` that talks to it, and its stop. */
export interface DockerDaemon {
  /** `unix://…`: what DOCKER_HOST names. */
  readonly host: string;
  /** A folder holding `docker`, the client pointed at this daemon, to put first on an agent's PATH. */
  readonly bin: string;
  /** Runs the client against this daemon; its stdout. */
  docker(...args: string[]): string;
  stop(): Promise<void>;
}

/** Starts dockerd in a folder of its own (vfs, host network only) and waits until it answers. */
export async function startDockerDaemon(): Promise<DockerDaemon> {
  const root = mkdtempSync(join(tmpdir(), 'relaunch-dockerd-'));
  const socket = join(root, 'docker.sock');
  const host = `unix://${socket}`;
  const daemon = spawn(
    DOCKERD,
    ['--iptables=false', '--ip6tables=false', '--bridge=none', '--storage-driver=vfs', '--data-root', join(root, 'data'), '--exec-root', join(root, 'exec'), '--pidfile', join(root, 'docker.pid'), '-H', host],
    { stdio: ['ignore', 'ignore', 'pipe'], detached: true },
  );
  let log = '';
  daemon.stderr?.on('data', (chunk: Buffer) => (log = (log + chunk.toString('utf8')).slice(-4000)));
  const docker = (...args: string[]): string => execFileSync(DOCKER, args, { encoding: 'utf8', env: { ...process.env, DOCKER_HOST: host }, stdio: ['ignore', 'pipe', 'pipe'] });
  try {
    await waitFor('dockerd to answer', () => {
      if (daemon.exitCode !== null) throw new Error(`dockerd exited (${daemon.exitCode}): ${log}`);
      try {
        docker('info', '--format', '{{.ServerVersion}}');
        return true;
      } catch {
        return undefined;
      }
    }, 60_000);
  } catch (error) {
    daemon.kill('SIGKILL');
    throw error;
  }
  const bin = join(root, 'bin');
  mkdirSync(bin);
  writeFileSync(join(bin, 'docker'), `#!/bin/sh\nDOCKER_HOST='${host}' exec ${DOCKER} "$@"\n`, { mode: 0o755 });
  return {
    host,
    bin,
    docker,
    stop: async () => {
      const ended = new Promise<void>((resolve) => daemon.once('exit', () => resolve()));
      daemon.kill('SIGTERM');
      const timer = setTimeout(() => daemon.kill('SIGKILL'), 20_000);
      await ended;
      clearTimeout(timer);
      // The daemon leaves its network namespace mounted (exec/netns/default): unmount what
      // is left under its folder, deepest first, then remove the folder.
      const mounts = readFileSync('/proc/mounts', 'utf8')
        .split('\n')
        .map((line) => line.split(' ')[1] ?? '')
        .filter((point) => point.startsWith(`${root}/`))
        .sort((a, b) => b.length - a.length);
      for (const point of mounts) execFileSync('umount', [point]);
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** busybox's commands an image gets beside bash (what jobs, the agent's phases and its container init use). */
const APPLETS = ['sh', 'sleep', 'cat', 'env', 'ls', 'ps', 'id', 'mkdir', 'rm', 'touch', 'pwd', 'printenv', 'tail', 'head', 'sed', 'grep', 'date', 'wc', 'tr', 'cut', 'sort', 'dirname', 'basename', 'chmod', 'cp', 'mv', 'ln', 'stat', 'awk', 'true', 'false', 'seq', 'timeout', 'hostname', 'uname', 'sync'];

/**
 * A small image, `tag`, made from this machine's Debian packages: bash with the libraries it
 * links, busybox-static's commands, /tmp, and root in /etc/passwd; imported with
 * `docker import` (vfs copies every layer for every container, so it stays a few MB).
 */
export function importTestImage(daemon: DockerDaemon, tag: string): void {
  const root = mkdtempSync(join(tmpdir(), 'relaunch-rootfs-'));
  try {
    const place = (file: string) => {
      const target = join(root, file);
      mkdirSync(dirname(target), { recursive: true });
      copyFileSync(file, target);
      chmodSync(target, 0o755);
    };
    place('/bin/bash');
    for (const line of execFileSync('ldd', ['/bin/bash'], { encoding: 'utf8' }).split('\n')) {
      const library = /(\/\S+) \(0x/.exec(line)?.[1];
      if (library !== undefined) place(library);
    }
    mkdirSync(join(root, 'usr', 'bin'), { recursive: true });
    copyFileSync(BUSYBOX, join(root, 'usr', 'bin', 'busybox'));
    chmodSync(join(root, 'usr', 'bin', 'busybox'), 0o755);
    for (const applet of APPLETS) symlinkSync('busybox', join(root, 'usr', 'bin', applet));
    mkdirSync(join(root, 'tmp'), { mode: 0o1777 });
    chmodSync(join(root, 'tmp'), 0o1777);
    mkdirSync(join(root, 'etc'), { recursive: true });
    writeFileSync(join(root, 'etc', 'passwd'), 'root:x:0:0:root:/root:/bin/bash\n');
    writeFileSync(join(root, 'etc', 'group'), 'root:x:0:\n');
    mkdirSync(join(root, 'root'));
    const archive = join(root, '..', `${root.split('/').at(-1)}.tar`);
    execFileSync('tar', ['-C', root, '-cf', archive, '.']);
    daemon.docker('import', '--change', 'ENV PATH=/usr/bin:/bin', archive, tag);
    rmSync(archive, { force: true });
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

/** A free TCP port of 127.0.0.1 (closed again at once). */
async function freePort(): Promise<number> {
  const server = createNetServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A registry on 127.0.0.1 (Docker takes any 127.0.0.0/8 registry over plain HTTP). */
export interface Registry {
  /** `127.0.0.1:PORT`. */
  readonly address: string;
  stop(): Promise<void>;
}

/** Debian's docker-registry on 127.0.0.1, with one user of htpasswd auth. */
export async function startRegistry(user: string, password: string): Promise<Registry> {
  const root = mkdtempSync(join(tmpdir(), 'relaunch-registry-'));
  const port = await freePort();
  writeFileSync(join(root, 'htpasswd'), execFileSync(HTPASSWD, ['-Bbn', user, password], { encoding: 'utf8' }));
  writeFileSync(
    join(root, 'config.yml'),
    [
      'version: 0.1',
      'log: {level: error}',
      `storage: {filesystem: {rootdirectory: ${join(root, 'data')}}}`,
      `http: {addr: "127.0.0.1:${port}"}`,
      `auth: {htpasswd: {realm: relaunch-test, path: ${join(root, 'htpasswd')}}}`,
      '',
    ].join('\n'),
  );
  const registry: ChildProcess = spawn(REGISTRY, ['serve', join(root, 'config.yml')], { stdio: 'ignore', detached: true });
  const address = `127.0.0.1:${port}`;
  await waitFor('the registry to answer', async () => {
    if (registry.exitCode !== null) throw new Error(`docker-registry exited (${registry.exitCode})`);
    const status = await new Promise<number>((resolve) => {
      const asked = httpRequest({ host: '127.0.0.1', port, path: '/v2/' }, (answer) => {
        answer.resume();
        resolve(answer.statusCode ?? 0);
      });
      asked.on('error', () => resolve(0));
      asked.end();
    });
    return status === 401 ? true : undefined;
  });
  return {
    address,
    stop: async () => {
      const ended = new Promise<void>((resolve) => registry.once('exit', () => resolve()));
      registry.kill('SIGTERM');
      await ended;
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/**
 * A proxy in front of a registry that answers its manifests 429, as Docker Hub does past
 * its pull limit, and its ping as an open registry does (no auth challenge, so a client
 * without credentials goes on to the manifest); everything else passes through. How many
 * requests it refused.
 */
export async function startThrottlingProxy(upstream: Registry): Promise<Registry & { readonly refused: () => number }> {
  let refused = 0;
  const [upstreamHost, upstreamPort] = upstream.address.split(':') as [string, string];
  const server: Server = createServer((request, response) => {
    // An open registry's ping: no auth challenge, so the client goes on to the manifest.
    if (request.url === '/v2/' || request.url === '/v2') {
      request.resume();
      response.writeHead(200, { 'content-type': 'application/json', 'docker-distribution-api-version': 'registry/2.0' }).end('{}');
      return;
    }
    if (/\/manifests\//.test(request.url ?? '')) {
      refused += 1;
      request.resume();
      response
        .writeHead(429, { 'content-type': 'application/json', 'docker-distribution-api-version': 'registry/2.0' })
        .end(JSON.stringify({ errors: [{ code: 'TOOMANYREQUESTS', message: 'You have reached your pull rate limit.' }] }));
      return;
    }
    const forwarded = httpRequest({ host: upstreamHost, port: Number(upstreamPort), path: request.url, method: request.method, headers: request.headers }, (answer) => {
      response.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(response);
    });
    forwarded.on('error', () => response.writeHead(502).end());
    request.pipe(forwarded);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    address: `127.0.0.1:${port}`,
    refused: () => refused,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
