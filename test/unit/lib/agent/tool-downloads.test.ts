// The agent's downloads of its own tools, run as cloud-init runs it (test/support/agent-harness.ts):
// a local HTTP server stands in for the vendor, serving a package, its detached signature
// and the signing key, and the agent must install only what the pinned key signed.

import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AGENT_LIBRARY, TOOL_DOWNLOADS, type ToolDownloads } from '../../../../lib/agent/script.ts';
import { api, dir, pathWithout, runAgent, spec, useAgentWorld } from '../../../support/agent-harness.ts';

useAgentWorld();

/** A signing key of the test's own: its GnuPG home, fingerprint and armored public key. */
interface TestKey {
  readonly home: string;
  readonly fingerprint: string;
  readonly publicKey: string;
}

const keysDir = mkdtempSync(join(tmpdir(), 'relaunch-keys-'));

function gpg(home: string, ...args: string[]): string {
  return execFileSync('gpg', ['--batch', '--quiet', '--homedir', home, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** A fresh ed25519 key (fast to make), as a vendor's would be. */
function makeKey(name: string): TestKey {
  const home = join(keysDir, name);
  mkdirSync(home, { mode: 0o700 });
  gpg(home, '--passphrase', '', '--quick-gen-key', `${name} <${name}@relaunch.invalid>`, 'ed25519', 'sign', 'never');
  const fingerprint = /^fpr:+([0-9A-F]{40}):/m.exec(gpg(home, '--with-colons', '--fingerprint'))?.[1];
  if (fingerprint === undefined) throw new Error(`no fingerprint for the test key ${name}`);
  return { home, fingerprint, publicKey: gpg(home, '--armor', '--export', fingerprint) };
}

function sign(key: TestKey, bytes: Buffer): Buffer {
  const file = join(keysDir, `payload-${Date.now()}-${Math.random()}`);
  writeFileSync(file, bytes);
  execFileSync('gpg', ['--batch', '--quiet', '--homedir', key.home, '--pinentry-mode', 'loopback', '--passphrase', '', '--detach-sign', '-o', `${file}.sig`, file]);
  return readFileSync(`${file}.sig`);
}

/**
 * A stand-in for AWS's CLI bundle: a zip whose `aws/install` puts an `aws` on the agent's
 * PATH (the folder `bin`) that copies from the folder `s3`, and marks that it ran.
 */
function cliBundle(folder: string, marker: string): Buffer {
  const root = join(folder, 'bundle');
  mkdirSync(join(root, 'aws'), { recursive: true });
  writeFileSync(
    join(root, 'aws', 'install'),
    `#!/bin/bash
touch "$DUMP_DIR/${marker}"
mkdir -p "$DUMP_DIR/bin"
printf '%s\\n' '#!/bin/bash' 'if [ "$1" = s3api ]; then exit 1; fi' 'mkdir -p "$5" && cp -r "$DUMP_DIR/s3/\${4#s3://}/." "$5/"' > "$DUMP_DIR/bin/aws"
chmod +x "$DUMP_DIR/bin/aws"
`,
  );
  chmodSync(join(root, 'aws', 'install'), 0o755);
  execFileSync('zip', ['-q', '-r', join(folder, 'bundle.zip'), 'aws'], { cwd: root });
  return readFileSync(join(folder, 'bundle.zip'));
}

/** The vendor: a path's bytes, 404 for any other; every request's path, in order. */
class Vendor {
  readonly files = new Map<string, Buffer>();
  readonly requested: string[] = [];
  private server: Server | undefined;

  async start(): Promise<string> {
    this.server = createServer((request, response) => {
      this.requested.push(request.url ?? '');
      const body = this.files.get(request.url ?? '');
      if (body === undefined) response.writeHead(404).end();
      else response.writeHead(200).end(body);
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => this.server?.close(() => resolve()));
  }
}

let vendorKey: TestKey;
let otherKey: TestKey;
const vendor = new Vendor();
let vendorUrl: string;

beforeAll(async () => {
  vendorKey = makeKey('vendor');
  otherKey = makeKey('impostor');
  vendorUrl = await vendor.start();
}, 60_000);

afterAll(async () => {
  await vendor.stop();
  for (const key of [vendorKey, otherKey]) execFileSync('gpgconf', ['--homedir', key.home, '--kill', 'all']);
  rmSync(keysDir, { recursive: true, force: true });
});

/** The downloads, at the vendor stand-in, pinned to the vendor's key. */
function downloads(): ToolDownloads {
  const arch = execFileSync('uname', ['-m'], { encoding: 'utf8' }).trim();
  vendor.requested.length = 0;
  return {
    ...TOOL_DOWNLOADS,
    awsCli: {
      url: `${vendorUrl}/awscli-exe-linux-{arch}-2.0.0.zip`,
      signatureUrl: `${vendorUrl}/awscli-exe-linux-{arch}-2.0.0.zip.sig`,
      keyUrl: `${vendorUrl}/keys/${arch}`,
      fingerprint: vendorKey.fingerprint,
    },
  };
}

/** Serves the CLI bundle, its signature and a key file, as the test says. */
function serve(bundle: Buffer, signature: Buffer, keys: string): void {
  const arch = execFileSync('uname', ['-m'], { encoding: 'utf8' }).trim();
  vendor.files.set(`/awscli-exe-linux-${arch}-2.0.0.zip`, bundle);
  vendor.files.set(`/awscli-exe-linux-${arch}-2.0.0.zip.sig`, signature);
  vendor.files.set(`/keys/${arch}`, Buffer.from(keys));
}

/** Runs a node whose task copies s3://datasets/train, on an image without the AWS CLI. */
async function runWithoutCli(): Promise<void> {
  mkdirSync(join(dir, 's3', 'datasets', 'train'), { recursive: true });
  writeFileSync(join(dir, 's3', 'datasets', 'train', 'a.csv'), 'x,y\n');
  const path = [join(dir, 'bin'), pathWithout('aws')].join(delimiter);
  await runAgent(
    { spec: spec({ run: 'cat "$HOME/train/a.csv" > "$DUMP_DIR/copied"' }), nodeRank: 0, toolDownloads: downloads(), mounts: [{ kind: 's3-copy', bucket: 'datasets', key: 'train/', dest: '~/train' }] },
    path,
  );
}

describe("the agent's tool downloads", () => {
  it('installs the pinned version of the AWS CLI once its vendor signature verifies, then uses it', async () => {
    const bundle = cliBundle(dir, 'installed');
    serve(bundle, sign(vendorKey, bundle), vendorKey.publicKey);

    await runWithoutCli();

    const arch = execFileSync('uname', ['-m'], { encoding: 'utf8' }).trim();
    expect(vendor.requested).toEqual([`/awscli-exe-linux-${arch}-2.0.0.zip`, `/awscli-exe-linux-${arch}-2.0.0.zip.sig`, `/keys/${arch}`]);
    expect(existsSync(join(dir, 'installed'))).toBe(true);
    expect(api.reports.map(({ phase, exitCode }) => [phase, exitCode])).toEqual([['setup', 0], ['run', 0]]);
    expect(readFileSync(join(dir, 'copied'), 'utf8')).toBe('x,y\n');
    expect(readFileSync(join(dir, 'agent', 'setup.log'), 'utf8')).toContain(`is signed by ${vendorKey.fingerprint}`);
  });

  it.each([
    ['a tampered bundle (the signature is of the genuine one)', 'tampered'],
    ['a bundle signed by another key, served as the key', 'other key'],
    ['a bundle whose signature is missing', 'no signature'],
  ] as const)("never runs %s: the agent's failure at install, naming the download", async (_, fault) => {
    const genuine = cliBundle(dir, 'installed');
    const tampered = Buffer.concat([genuine, Buffer.from('tampered')]);
    if (fault === 'tampered') serve(tampered, sign(vendorKey, genuine), vendorKey.publicKey);
    if (fault === 'other key') serve(genuine, sign(otherKey, genuine), `${vendorKey.publicKey}\n${otherKey.publicKey}`);
    if (fault === 'no signature') serve(genuine, Buffer.from(''), vendorKey.publicKey);

    await runWithoutCli();

    expect(existsSync(join(dir, 'installed'))).toBe(false);
    const [report] = api.reports;
    expect(api.reports).toHaveLength(1);
    expect(report?.agentFailure?.step).toBe('install');
    expect(report?.agentFailure?.error).toMatch(
      new RegExp(`^the AWS CLI from ${vendorUrl}/awscli-exe-linux-[a-z0-9_]+-2\\.0\\.0\\.zip does not carry a good signature by its vendor's key ${vendorKey.fingerprint}: not installed$`),
    );
    expect(existsSync(join(dir, 'agent', 'awscli.zip'))).toBe(false);
  });

  it("installs mountpoint-s3's pinned package for this machine's architecture and packager once verified, and mounts with it", async () => {
    const arch = execFileSync('uname', ['-m'], { encoding: 'utf8' }).trim().replace('aarch64', 'arm64');
    const deb = Buffer.from('a stand-in for mountpoint-s3 1.21.0');
    vendor.files.set(`/mount-s3/${arch}/mount-s3-1.21.0-${arch}.deb`, deb);
    vendor.files.set(`/mount-s3/${arch}/mount-s3-1.21.0-${arch}.deb.asc`, sign(vendorKey, deb));
    vendor.files.set('/public_keys/KEYS', Buffer.from(vendorKey.publicKey));
    // apt-get stands in for Debian's: installing the verified package puts a mount-s3 on PATH.
    const bin = join(dir, 'bin');
    mkdirSync(bin);
    writeFileSync(
      join(bin, 'apt-get'),
      `#!/bin/bash\nprintf '%s\\n' "$*" >> "$DUMP_DIR/apt-get.log"\nprintf '%s\\n' '#!/bin/bash' 'mkdir -p "$2"; echo mounted > "$2/marker"' > "$DUMP_DIR/bin/mount-s3"\nchmod +x "$DUMP_DIR/bin/mount-s3"\n`,
      { mode: 0o755 },
    );
    const toolDownloads: ToolDownloads = {
      ...downloads(),
      mountS3: {
        url: `${vendorUrl}/mount-s3/{arch}/mount-s3-1.21.0-{arch}.{pkg}`,
        signatureUrl: `${vendorUrl}/mount-s3/{arch}/mount-s3-1.21.0-{arch}.{pkg}.asc`,
        keyUrl: `${vendorUrl}/public_keys/KEYS`,
        fingerprint: vendorKey.fingerprint,
      },
    };

    await runAgent(
      { spec: spec({ run: 'cat "$HOME/ckpt/marker" > "$DUMP_DIR/mounted"' }), nodeRank: 0, toolDownloads, mounts: [{ kind: 's3-mount', bucket: 'ckpt', prefix: '', cached: false, dest: '~/ckpt' }] },
      [bin, pathWithout('mount-s3', 'apt-get', 'dnf')].join(delimiter),
    );

    expect(vendor.requested).toEqual([`/mount-s3/${arch}/mount-s3-1.21.0-${arch}.deb`, `/mount-s3/${arch}/mount-s3-1.21.0-${arch}.deb.asc`, '/public_keys/KEYS']);
    expect(readFileSync(join(dir, 'apt-get.log'), 'utf8')).toContain(join(dir, 'agent', 'mount-s3.deb'));
    expect(api.reports.map(({ phase, exitCode }) => [phase, exitCode])).toEqual([['setup', 0], ['run', 0]]);
    expect(readFileSync(join(dir, 'mounted'), 'utf8')).toBe('mounted\n');
  });

  it("says which file could not be downloaded: the agent's failure at install", async () => {
    const bundle = cliBundle(dir, 'installed');
    serve(bundle, sign(vendorKey, bundle), vendorKey.publicKey);
    vendor.files.clear();

    await runWithoutCli();

    expect(api.reports[0]?.agentFailure).toEqual({ step: 'install', error: expect.stringMatching(new RegExp(`^could not download the AWS CLI from ${vendorUrl}/awscli-exe-linux-`)) });
    expect(existsSync(join(dir, 'installed'))).toBe(false);
  });

  it("fetches the agent's library (the installs) from the API only when a mount needs a tool, and checks its SHA-256", async () => {
    const bundle = cliBundle(dir, 'installed');
    serve(bundle, sign(vendorKey, bundle), vendorKey.publicKey);

    await runWithoutCli();

    expect(api.requests.filter((r) => r.path.endsWith('/shipper'))).toHaveLength(1);
    expect(readFileSync(join(dir, 'agent', 'library.sh'), 'utf8')).toBe(AGENT_LIBRARY.program);
  });

  it('fetches nothing more for a task that needs no tool and ships nothing, as the local runtime runs it', async () => {
    await runAgent({ spec: spec({ run: 'echo done' }), nodeRank: 0, mounts: [] });

    expect(api.requests.map((r) => r.path).filter((path) => !/\/(heartbeat|report|hold)$/.test(path))).toEqual([]);
    expect(api.reports.map(({ phase, exitCode }) => [phase, exitCode])).toEqual([['setup', 0], ['run', 0]]);
  });

  it("ends the node AGENT_FAILED at mounts, naming the library, when a mount needs a tool and the API does not serve the library", async () => {
    const bundle = cliBundle(dir, 'installed');
    serve(bundle, sign(vendorKey, bundle), vendorKey.publicKey);
    api.libraryStatus = 503;

    await runWithoutCli();

    expect(api.requests.filter((r) => r.path.endsWith('/shipper'))).toHaveLength(3);
    expect(vendor.requested).toEqual([]);
    expect(api.reports).toHaveLength(1);
    expect(api.reports[0]?.agentFailure).toEqual({
      step: 'mounts',
      error: expect.stringMatching(/^could not prepare ~\/train \(s3-copy\): the agent's library could not be fetched from http:\/\/\S+\/shipper \(last answer: HTTP 503\): cannot copy s3:\/\/datasets$/),
    });
  });
});
