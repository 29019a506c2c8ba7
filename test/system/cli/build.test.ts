// The CLI's build (cli/build.ts) and the check cli/bin.js makes before it runs it
// (cli/built.js): a build is run only while nothing it was made from has changed.

import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { staleChunks } from '../../../cli/build.ts';
import { BUILD_DIR, BUILD_ENTRY, BUILD_MANIFEST, currentBuild, type BuildManifest } from '../../../cli/built.js';
import { BIN, EXAMPLES, removeTempDirs, tempDir } from '../../support/cli.ts';
import { REPO_ROOT } from '../../../infra/lambda-catalog.ts';


describe('currentBuild', () => {
  let root: string;
  let buildDir: string;
  const started = Date.parse('2026-12-05T10:00:00Z');
  const before = new Date(started - 60_000);
  const after = new Date(started + 60_000);

  /** A project of two sources, changed a minute before the build began, and the build. */
  beforeEach(async () => {
    root = await tempDir('build');
    buildDir = join(root, 'dist/cli');
    mkdirSync(join(root, 'cli'));
    mkdirSync(buildDir, { recursive: true });
    for (const file of ['cli/main.ts', 'package.json']) {
      writeFileSync(join(root, file), '');
      utimesSync(join(root, file), before, before);
    }
    writeFileSync(join(buildDir, BUILD_ENTRY), '');
    writeManifest({ entry: BUILD_ENTRY, startedMs: started, inputs: ['cli/main.ts', 'package.json'] });
  });
  afterEach(removeTempDirs);

  function writeManifest(manifest: unknown): void {
    writeFileSync(join(buildDir, BUILD_MANIFEST), typeof manifest === 'string' ? manifest : JSON.stringify(manifest));
  }

  it('is the bundle while every input is older than the build', () => {
    expect(currentBuild(root, buildDir)?.href).toBe(pathToFileURL(join(buildDir, BUILD_ENTRY)).href);
  });

  it('is nothing once an input changed after the build began, even during it', () => {
    utimesSync(join(root, 'cli/main.ts'), after, after);
    expect(currentBuild(root, buildDir)).toBeUndefined();
    const duringTheBuild = new Date(started);
    utimesSync(join(root, 'cli/main.ts'), duringTheBuild, duringTheBuild);
    expect(currentBuild(root, buildDir)).toBeUndefined();
  });

  it('is nothing once an input is gone', () => {
    rmSync(join(root, 'package.json'));
    expect(currentBuild(root, buildDir)).toBeUndefined();
  });

  it('is nothing without the bundle', () => {
    rmSync(join(buildDir, BUILD_ENTRY));
    expect(currentBuild(root, buildDir)).toBeUndefined();
  });

  it('is the bundle while every chunk it lists is there, and nothing once one is gone', () => {
    writeFileSync(join(buildDir, 'chunk-ONE.mjs'), '');
    writeManifest({ entry: BUILD_ENTRY, startedMs: started, inputs: ['cli/main.ts'], chunks: ['chunk-ONE.mjs'] });
    expect(currentBuild(root, buildDir)).toBeDefined();
    rmSync(join(buildDir, 'chunk-ONE.mjs'));
    expect(currentBuild(root, buildDir)).toBeUndefined();
  });

  it.each([
    ['no manifest', undefined],
    ['a manifest cut short', '{"entry":"relaunch.mjs","startedMs":17'],
    ['a manifest of another shape', { entry: BUILD_ENTRY, startedMs: String(started), inputs: [] }],
    ['a manifest naming another file', { entry: '../../elsewhere.mjs', startedMs: started, inputs: [] }],
    ['inputs that are not paths', { entry: BUILD_ENTRY, startedMs: started, inputs: [42] }],
    ['chunks that are not a list', { entry: BUILD_ENTRY, startedMs: started, inputs: [], chunks: 'chunk-ONE.mjs' }],
    ['a chunk outside the build folder', { entry: BUILD_ENTRY, startedMs: started, inputs: [], chunks: ['../../cli/main.ts'] }],
    ['null', null],
  ])('is nothing with %s', (_, manifest) => {
    if (manifest === undefined) rmSync(join(buildDir, BUILD_MANIFEST));
    else writeManifest(manifest);
    expect(currentBuild(root, buildDir)).toBeUndefined();
  });
});

describe('staleChunks', () => {
  it('is every chunk file this build did not write that is over a day old, and nothing else', () => {
    const now = Date.parse('2026-12-06T12:00:00Z');
    const dayAndMinute = 24 * 60 * 60 * 1000 + 60_000;
    const files = [
      { name: 'relaunch.mjs', mtimeMs: now - dayAndMinute },
      { name: 'manifest.json', mtimeMs: now - dayAndMinute },
      { name: 'chunk-OLD1.mjs', mtimeMs: now - dayAndMinute },
      { name: 'chunk-RECENT.mjs', mtimeMs: now - 60_000 },
      { name: 'chunk-NEW1.mjs', mtimeMs: now - dayAndMinute },
      { name: 'chunk-OLD2.mjs.123.tmp', mtimeMs: now - dayAndMinute },
    ];
    expect(staleChunks(files, ['chunk-NEW1.mjs'], now)).toEqual(['chunk-OLD1.mjs']);
  });
});

describe('the build of this checkout', () => {
  const manifest = (): BuildManifest => JSON.parse(readFileSync(join(REPO_ROOT, BUILD_DIR, BUILD_MANIFEST), 'utf8')) as BuildManifest;

  it('is current (the tests run what npm ci leaves), made of the project files and the dependencies', () => {
    expect(currentBuild(REPO_ROOT)).toBeDefined();
    const { inputs } = manifest();
    expect(inputs).toEqual(expect.arrayContaining(['cli/main.ts', 'lib/agent/agent-source.ts', 'local/runtime.ts', 'package-lock.json', 'node_modules/.package-lock.json']));
    expect(inputs.filter((input) => input.startsWith('node_modules/') && input !== 'node_modules/.package-lock.json')).toEqual([]);
  });

  /** Runs `relaunch ...args`, with a hook that prints each module of the CLI's own it loads. */
  function relaunch(args: readonly string[], env: NodeJS.ProcessEnv) {
    const printLoads = 'data:text/javascript,export async function load(url, context, next) { if (/[/](cli|dist)[/]/.test(url)) console.error("loaded " + url); return next(url, context); }';
    const hook = `data:text/javascript,import { register } from "node:module"; register(${JSON.stringify(printLoads)});`;
    const result = spawnSync(process.execPath, ['--import', hook, BIN, ...args], { env: { ...process.env, ...env }, encoding: 'utf8' });
    const loaded = result.stderr.split('\n').filter((line) => line.startsWith('loaded '));
    const stderr = result.stderr.split('\n').filter((line) => !line.startsWith('loaded ')).join('\n');
    return { status: result.status, stdout: result.stdout, stderr, loaded };
  }

  const validate = (env: NodeJS.ProcessEnv) => relaunch(['validate', join(EXAMPLES, 'fail-fast.yaml')], env);

  it('is what bin.js runs, and answers as the sources do, which RELAUNCH_FROM_SOURCE=1 runs instead', () => {
    const built = validate({ RELAUNCH_FROM_SOURCE: undefined });
    const source = validate({ RELAUNCH_FROM_SOURCE: '1' });
    expect(built.loaded.some((line) => line.endsWith(`/${BUILD_DIR}/${BUILD_ENTRY}`))).toBe(true);
    expect(built.loaded.some((line) => line.endsWith('/cli/main.ts'))).toBe(false);
    expect(source.loaded.some((line) => line.includes(`/${BUILD_DIR}/`))).toBe(false);
    expect(source.loaded.some((line) => line.endsWith('/cli/main.ts'))).toBe(true);
    expect(built.status).toBe(0);
    expect({ ...built, loaded: [] }).toEqual({ ...source, loaded: [] });
  });
  it("keeps `relaunch check` and the AWS SDK clients only it uses in chunks that no other command reads", () => {
    const files = (loaded: readonly string[]) => loaded.map((line) => fileURLToPath(line.slice('loaded '.length))).filter((file) => file.includes(`/${BUILD_DIR}/`));
    const holdsEc2 = (file: string) => readFileSync(file, 'utf8').includes('node_modules/@aws-sdk/client-ec2/');
    const validated = validate({ RELAUNCH_FROM_SOURCE: undefined });
    expect(validated.status).toBe(0);
    expect(files(validated.loaded).filter(holdsEc2)).toEqual([]);
    // Its own command loads them: the check of credentials fails here, with none in the environment.
    const env = Object.fromEntries(Object.keys(process.env).filter((key) => key.startsWith('AWS_')).map((key) => [key, undefined]));
    const checked = relaunch(['check', '--region', 'us-east-1', '--api', 'http://127.0.0.1:9'], { ...env, RELAUNCH_FROM_SOURCE: undefined, AWS_EC2_METADATA_DISABLED: 'true', AWS_CONFIG_FILE: '/nonexistent', AWS_SHARED_CREDENTIALS_FILE: '/nonexistent' });
    expect(checked.stdout).toContain('credentials');
    expect(files(checked.loaded).some(holdsEc2)).toBe(true);
    const { chunks } = manifest();
    expect(chunks.length).toBeGreaterThan(0);
    for (const file of files([...validated.loaded, ...checked.loaded])) {
      expect([BUILD_ENTRY, ...chunks]).toContain(file.slice(file.lastIndexOf('/') + 1));
    }
  });
});
