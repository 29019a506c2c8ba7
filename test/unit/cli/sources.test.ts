// Packing local sources: the same content always packs to the same archive (so a resubmit
// uploads nothing), links given as sources are followed, and the task is rewritten to
// name each archive, in every task of a pipeline.

import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LocalSourceStore, packSource, uploadSources } from '../../../cli/sources.ts';
import { InvalidInputError } from '../../../lib/errors.ts';
import { parseJobFile } from '../../../lib/task-file/parse.ts';
import { buildSkyProject, SYNCED_FILES } from '../../support/fixtures/sky-project.ts';
import { bufferIo } from '../../support/cli.ts';

async function folder(): Promise<string> {
  return mkdtemp(join(tmpdir(), 'relaunch-sources-'));
}

describe('packSource', () => {
  it('packs the same tree to the same bytes, whatever the files\' times', async () => {
    const dir = await folder();
    mkdirSync(join(dir, 'src', 'lib'), { recursive: true });
    writeFileSync(join(dir, 'src', 'b.py'), 'b\n');
    writeFileSync(join(dir, 'src', 'lib', 'a.py'), 'a\n');
    const first = await packSource(join(dir, 'src'), await folder());
    utimesSync(join(dir, 'src', 'b.py'), new Date(2001, 1, 1), new Date(2001, 1, 1));
    const second = await packSource(join(dir, 'src'), await folder());

    expect(second.sha256).toBe(first.sha256);
    expect(first).toMatchObject({ entry: 'dir', files: 2 });
    expect(execFileSync('tar', ['-tzf', first.archive], { encoding: 'utf8' }).trim().split('\n')).toEqual(['b.py', 'lib/', 'lib/a.py']);

    writeFileSync(join(dir, 'src', 'b.py'), 'changed\n');
    expect((await packSource(join(dir, 'src'), await folder())).sha256).not.toBe(first.sha256);
  });

  it('follows a link given as the source, and packs an empty folder as a folder', async () => {
    const dir = await folder();
    writeFileSync(join(dir, 'real.json'), '{"a": 1}\n');
    symlinkSync(join(dir, 'real.json'), join(dir, 'link.json'));
    mkdirSync(join(dir, 'empty'));

    const linked = await packSource(join(dir, 'link.json'), await folder());
    expect(execFileSync('tar', ['-xzOf', linked.archive], { encoding: 'utf8' })).toBe('{"a": 1}\n');
    expect(await packSource(join(dir, 'empty'), await folder())).toMatchObject({ entry: 'dir', files: 0 });
  });
});

/** The files (links included, folders not) an archive holds, sorted. */
function filesIn(archive: string): string[] {
  return execFileSync('tar', ['-tzf', archive], { encoding: 'utf8' })
    .trim()
    .split('\n')
    .filter((name) => name !== '' && !name.endsWith('/'))
    .sort();
}

describe('packSource leaves out what SkyPilot leaves out', () => {
  it('honours .gitignore through git, at every depth, keeps tracked files, and never packs .git or the data folder', async () => {
    const dir = await folder();
    buildSkyProject(dir);
    // relaunch's own data folder, where the command runs: it must never go into the archive.
    mkdirSync(join(dir, '.relaunch', 'sources'), { recursive: true });
    writeFileSync(join(dir, '.relaunch', 'sources', 'old.tar.gz'), 'x'.repeat(1000));

    const packed = await packSource(dir, await folder(), [join(dir, '.relaunch')]);

    expect(filesIn(packed.archive)).toEqual(SYNCED_FILES);
    expect(packed.ignored?.by).toBe('.gitignore');
    expect(packed.warnings).toEqual([]);
  });

  it('lets a .skyignore win outright: .gitignore is not read, a nested .skyignore is a plain file', async () => {
    const dir = await folder();
    buildSkyProject(dir);
    writeFileSync(join(dir, '.skyignore'), ['# only the data', '/data', 'models/__pycache__', '!keep.md', ''].join('\n'));
    writeFileSync(join(dir, 'src', '.skyignore'), 'train.py\n');

    const packed = await packSource(dir, await folder());

    const files = filesIn(packed.archive);
    expect(files).not.toContain('data/shard-000.bin');
    expect(files).not.toContain('src/models/__pycache__/net.cpython-311.pyc');
    // .gitignore's rules are not applied: checkpoints, logs and the nested gen/ folder go.
    expect(files).toEqual(expect.arrayContaining(['checkpoints/step-100.ckpt', 'logs/run-1.log', 'src/gen/schema.py', 'src/train.py', 'src/.skyignore', '.env', 'notes/keep.md']));
    expect(files.some((file) => file.startsWith('.git/'))).toBe(false);
    expect(packed.ignored?.by).toBe('.skyignore');
  });

  it.each([
    { rule: 'build', gone: ['build/x', 'a/build/y'], kept: ['rebuild/z'] },
    { rule: '/build', gone: ['build/x'], kept: ['a/build/y'] },
    { rule: 'a/build', gone: ['a/build/y', 'q/a/build/w'], kept: ['build/x'] },
    { rule: '*.pyc', gone: ['x.pyc', 'p/y.pyc'], kept: ['.h.pyc', '.venv/z.pyc'] },
    { rule: '.venv', gone: ['.venv/z.pyc', 'p/.venv/w'], kept: ['.env'] },
    { rule: '.*', gone: ['.env', '.venv/z.pyc'], kept: ['x.pyc'] },
    { rule: 'logs/', gone: ['logs/a.log'], kept: ['file-logs'] },
    { rule: '!x.pyc', gone: ['!x.pyc'], kept: ['x.pyc'] },
  ])('reads the .skyignore line $rule as a Python glob, as SkyPilot does', async ({ rule, gone, kept }) => {
    const dir = await folder();
    for (const file of [...gone, ...kept]) {
      mkdirSync(join(dir, file, '..'), { recursive: true });
      writeFileSync(join(dir, file), `${file}\n`);
    }
    writeFileSync(join(dir, '.skyignore'), `${rule}\n`);

    const files = filesIn((await packSource(dir, await folder())).archive);

    for (const file of gone) expect(files).not.toContain(file);
    for (const file of kept) expect(files).toContain(file);
  });

  it('packs everything, with a warning, when a .gitignore is outside any git repository', async () => {
    const dir = await folder();
    writeFileSync(join(dir, '.gitignore'), 'data/\n');
    mkdirSync(join(dir, 'data'));
    writeFileSync(join(dir, 'data', 'x'), 'x\n');

    const packed = await packSource(dir, await folder());

    expect(filesIn(packed.archive)).toEqual(['.gitignore', 'data/x']);
    expect(packed.warnings).toEqual([expect.stringContaining('is not in a git repository')]);
  });
});

describe('uploadSources', () => {
  it('names each archive in every task of a pipeline, packs a path used twice once, and keeps the rest of the file', async () => {
    const dir = await folder();
    mkdirSync(join(dir, 'code'));
    writeFileSync(join(dir, 'code', 'x.py'), 'x\n');
    writeFileSync(join(dir, 'cfg'), 'c\n');
    const text = [
      'name: two-steps',
      '---',
      '# the first step',
      'workdir: ./code',
      'file_mounts:',
      '  ~/cfg: ./cfg',
      '  /data: s3://team-data/x',
      'run: python x.py',
      '---',
      'file_mounts:',
      '  /copy: {source: ./cfg, mode: COPY}',
      'run: cat /copy',
      '',
    ].join('\n');
    const store = new LocalSourceStore(join(dir, 'store'));
    const io = bufferIo();

    const rewritten = await uploadSources(text, parseJobFile(text), dir, store, io);

    const job = parseJobFile(rewritten);
    expect(job.tasks[0]?.spec.workdir).toMatch(/^upload:dir:sha256:[0-9a-f]{64}$/);
    expect(job.tasks[0]?.spec.fileMounts?.map((mount) => mount.source.kind)).toEqual(['upload', 's3']);
    expect(job.tasks[1]?.spec.fileMounts?.[0]?.source).toEqual(job.tasks[0]?.spec.fileMounts?.[0]?.source);
    expect(rewritten).toContain('# the first step');
    expect(readdirSync(join(dir, 'store'))).toHaveLength(2);
    expect(io.stderr).toHaveLength(2);
  });

  it('names every missing source at once and stores nothing', async () => {
    const dir = await folder();
    writeFileSync(join(dir, 'file'), 'f\n');
    const text = 'workdir: ./file\nfile_mounts:\n  /a: ./missing\nrun: x\n';

    const refused = uploadSources(text, parseJobFile(text), dir, new LocalSourceStore(join(dir, 'store')), bufferIo());

    await expect(refused).rejects.toThrow(InvalidInputError);
    await expect(refused).rejects.toMatchObject({
      issues: [
        { path: 'workdir', message: expect.stringContaining('expected a local folder, got ./file') },
        { path: 'file_mounts["/a"]', message: expect.stringContaining('expected an existing local file or folder, got ./missing') },
      ],
    });
    expect(readFileSync(join(dir, 'file'), 'utf8')).toBe('f\n');
  });
});
