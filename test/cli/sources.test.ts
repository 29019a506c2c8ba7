// Packing local sources: the same content always packs to the same archive (so a resubmit
// uploads nothing), links given as sources are followed, and the task is rewritten to
// name each archive, in every task of a pipeline.

import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LocalSourceStore, packSource, uploadSources } from '../../cli/sources.ts';
import { InvalidInputError } from '../../lib/errors.ts';
import { parseJobFile } from '../../lib/spec/parse.ts';
import { bufferIo } from './helpers.ts';

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
