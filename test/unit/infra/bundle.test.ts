// The Lambda bundler (infra/bundle.ts): the SDK schema rewrite it relies on, and a real
// bundle of the Lambda that sends the most EC2 commands, loaded in a fresh Node process.

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { bundle, bundleLambda, bundleLambdaCached, literalSchemaKeys, restoreCachedBundle } from '../../../infra/bundle.ts';
import { LAMBDA_NAMES, LAMBDA_NEEDS, LambdaName, REPO_ROOT, type LambdaNeeds } from '../../../infra/lambda-catalog.ts';

const out = mkdtempSync(join(tmpdir(), 'relaunch-bundle-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));

describe('literalSchemaKeys', () => {
  it('writes computed keys naming string constants as the literals they hold', () => {
    const source = ['const _xN = "xmlName";', 'const _q = "a \\"quoted\\" name";', 'export var S$ = [0, { [_xN]: _q }, {a: 1, [_q]: 2}];'].join('\n');
    expect(literalSchemaKeys(source)).toBe(
      ['const _xN = "xmlName";', 'const _q = "a \\"quoted\\" name";', 'export var S$ = [0, { "xmlName": _q }, {a: 1, "a \\"quoted\\" name": 2}];'].join('\n'),
    );
  });

  it('leaves keys naming anything else, and member accesses, as they are', () => {
    const source = 'let _v = f();\nconst _c = "c";\nexport var S$ = { [_v]: 1, [_other]: 2 }, t = ok ? a[_c]: b;';
    expect(literalSchemaKeys(source)).toBe(source);
  });
});

describe('bundle', () => {
  it("keeps only the EC2 shapes a bundle's commands use", async () => {
    const entry = "import { EC2Client, RunInstancesCommand } from '@aws-sdk/client-ec2'; globalThis.kept = [EC2Client, RunInstancesCommand];";
    const { metafile } = await bundle({ stdin: { contents: entry, resolveDir: REPO_ROOT, loader: 'ts' } }, join(out, 'ec2'));
    const inputs = Object.values(metafile.outputs).flatMap((output) => Object.entries(output.inputs));
    const schemas = inputs.find(([path]) => path.includes('client-ec2/dist-es/schemas/'));
    expect(schemas).toBeDefined();
    // The whole module is about 530 KiB minified: every shape of every EC2 operation.
    expect(schemas?.[1].bytesInOutput).toBeLessThan(100 * 1024);
  });

  it('builds a Lambda that a fresh Node process loads, its handler exported', async () => {
    const built = await bundleLambda(LambdaName.launchAttempt, join(out, 'launch'));
    expect(built.entry).toBe(join(out, 'launch', 'index.mjs'));
    // The SDK's other credential sources are chunks, read only if the environment has none.
    expect(readdirSync(join(out, 'launch', 'chunks')).length).toBeGreaterThan(0);
    expect(built.loadedBytes).toBeLessThan(built.bytes);
    const script = `const m = await import(${JSON.stringify(pathToFileURL(built.entry).href)}); process.stdout.write(typeof m.handler);`;
    const loaded = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
      env: { PATH: process.env.PATH, AWS_REGION: 'us-east-1' },
      encoding: 'utf8',
    });
    expect(loaded).toBe('function');
  });

  // What each Lambda reaches (the catalog, which IAM follows) decides its SDK clients.
  const clientsFor = (needs: LambdaNeeds) =>
    [
      '@aws-sdk/client-dynamodb',
      ...(needs.workflow.length > 0 ? ['@aws-sdk/client-sfn'] : []),
      // EC2, and SSM for the default AMIs and the agents' secrets (a release deletes them).
      ...(needs.compute !== false ? ['@aws-sdk/client-ec2'] : []),
      // SSM: the default AMIs, the agents' secrets (a release deletes them), jobs' secrets.
      ...(needs.compute !== false || (needs.secrets ?? []).length > 0 ? ['@aws-sdk/client-ssm'] : []),
      ...(needs.notifies === true ? ['@aws-sdk/client-sns'] : []),
      ...(needs.deadLetters === true ? ['@aws-sdk/client-sqs'] : []),
      ...(needs.deletesMounts === true ? ['@aws-sdk/client-s3'] : []),
      ...(needs.givesDataCredentials === true ? ['@aws-sdk/client-sts'] : []),
      ...(needs.readsLogs === true ? ['@aws-sdk/client-cloudwatch-logs'] : []),
    ].sort();

  it.each(LAMBDA_NAMES)('puts in %s only the SDK clients it uses', async (name) => {
    const { metafile } = await bundleLambda(name, join(out, 'clients', name));
    const clients = new Set(
      Object.values(metafile.outputs)
        .flatMap((output) => Object.keys(output.inputs))
        .map((path) => /node_modules\/(@aws-sdk\/client-[^/]+)\//.exec(path)?.[1])
        .filter((client) => client !== undefined),
    );
    expect([...clients].sort()).toEqual(clientsFor(LAMBDA_NEEDS[name]));
  });

  it("keeps the SNS client out of a notifying Lambda's cold start, in a chunk of its own", async () => {
    const { metafile, loadedFiles, lazyChunks } = await bundleLambda(LambdaName.evaluatePolicy, join(out, 'notify'));
    const inputsOf = (files: readonly string[]) =>
      Object.entries(metafile.outputs)
        .filter(([path]) => files.includes(resolve(REPO_ROOT, path)))
        .flatMap(([, output]) => Object.keys(output.inputs));
    const sns = (input: string) => input.includes('node_modules/@aws-sdk/client-sns/') || input === 'lib/adapters/sns-job-notifier.ts';
    expect(inputsOf(loadedFiles).filter(sns)).toEqual([]);
    const notifierChunks = lazyChunks.filter((chunk) => inputsOf([chunk]).includes('functions/shared/job-notifier.ts'));
    expect(notifierChunks).toHaveLength(1);
    expect(inputsOf(notifierChunks)).toEqual(expect.arrayContaining(['lib/adapters/sns-job-notifier.ts']));
    expect(inputsOf(notifierChunks).some((input) => input.includes('node_modules/@aws-sdk/client-sns/'))).toBe(true);
  });

  it("keeps the API's task parser out of what its cold start reads, in a chunk of its own", async () => {
    const { metafile, loadedFiles, lazyChunks } = await bundleLambda(LambdaName.api, join(out, 'api'));
    const inputsOf = (files: readonly string[]) =>
      Object.entries(metafile.outputs)
        .filter(([path]) => files.includes(resolve(REPO_ROOT, path)))
        .flatMap(([, output]) => Object.keys(output.inputs));
    const parser = (input: string) => input.includes('node_modules/yaml/') || ['lib/task-file/parse.ts', 'lib/task-file/schema.ts'].includes(input);
    expect(inputsOf(loadedFiles).filter(parser)).toEqual([]);
    const parserChunks = lazyChunks.filter((chunk) => inputsOf([chunk]).includes('lib/task-file/parse.ts'));
    expect(parserChunks).toHaveLength(1);
    expect(inputsOf(parserChunks)).toEqual(expect.arrayContaining(['lib/usecases/submit-job.ts', 'lib/task-file/parse.ts']));
    expect(inputsOf(parserChunks).some((input) => input.includes('node_modules/yaml/'))).toBe(true);
  });
});

describe('the bundle cache', () => {
  const cache = join(out, 'cache');
  const files = (dir: string) => (readdirSync(dir, { recursive: true }) as string[]).sort();

  it("is used when none of a Lambda's sources changed, and not once one did", async () => {
    expect((await bundleLambdaCached(LambdaName.takeDown, join(out, 'cached-1'), cache)).fromCache).toBe(false);
    expect((await bundleLambdaCached(LambdaName.takeDown, join(out, 'cached-2'), cache)).fromCache).toBe(true);
    expect(files(join(out, 'cached-2'))).toEqual(files(join(out, 'cached-1')));
    expect(readFileSync(join(out, 'cached-2', 'index.mjs'))).toEqual(readFileSync(join(out, 'cached-1', 'index.mjs')));
    expect(restoreCachedBundle(LambdaName.takeDown, join(out, 'cached-3'), cache)).toBe(true);

    // The cache's record of the handler's source no longer matches the file: as after an edit.
    const manifestPath = join(cache, LambdaName.takeDown, 'manifest.json');
    const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as { sources: Record<string, string> };
    expect(Object.keys(manifest.sources)).toEqual(expect.arrayContaining(['functions/take-down/handler.ts', 'lib/usecases/take-down.ts', 'infra/bundle.ts']));
    expect(Object.keys(manifest.sources).some((path) => path.startsWith('node_modules/@aws-sdk/client-ec2/'))).toBe(true);
    manifest.sources['lib/usecases/take-down.ts'] = '0'.repeat(64);
    writeFileSync(manifestPath, JSON.stringify(manifest));
    expect(restoreCachedBundle(LambdaName.takeDown, join(out, 'cached-4'), cache)).toBe(false);
    expect((await bundleLambdaCached(LambdaName.takeDown, join(out, 'cached-5'), cache)).fromCache).toBe(false);
    expect(restoreCachedBundle(LambdaName.takeDown, join(out, 'cached-6'), cache)).toBe(true);
  }, 120_000);
});
