// A task with a Docker image, run locally with the real binary: refused at submit (exit 2)
// where docker cannot run containers, and run through docker where it can. Docker itself
// is a stand-in on PATH that records its calls and runs `docker exec`'s command here.

import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { JobView } from '../../../lib/views.ts';
import { killStrayClis, parseStdout, removeTempDirs, runCli, SLOW, standInDocker, tempDir, writeTask } from '../../support/cli.ts';

afterAll(async () => {
  killStrayClis();
  await removeTempDirs();
});

const TASK = 'resources:\n  image_id: docker:ubuntu:22.04\nrun: |\n  echo "in container: $IN_CONTAINER"\n';

describe('a task with a Docker image, locally', () => {
  it('is refused at submit where docker cannot run containers, naming the field and why', async () => {
    const dir = await tempDir('docker-unusable');
    const file = await writeTask(dir, 'task.yaml', TASK);
    const env = { PATH: standInDocker(dir, { usable: false }), DOCKER_LOG: join(dir, 'docker.log') };

    const result = await runCli(['run', file, '--data-dir', join(dir, 'data')], { cwd: dir, env });

    expect(result.code).toBe(2);
    expect(result.stderr).toContain('resources.image_id: expected docker to be usable here to run docker:ubuntu:22.04 locally, but docker info failed: Cannot connect to the Docker daemon');
  });

  it('leaves nothing behind when refused at submit: no packed sources, no bucket folder', async () => {
    const dir = await tempDir('docker-refused');
    await mkdir(join(dir, 'code'));
    await writeFile(join(dir, 'code', 'train.sh'), 'echo train\n');
    const file = await writeTask(dir, 'task.yaml', `workdir: ./code\nfile_mounts:\n  /out: {name: fresh-outputs, mode: MOUNT}\n${TASK}`);
    const env = { PATH: standInDocker(dir, { usable: false }), DOCKER_LOG: join(dir, 'docker.log') };
    const data = join(dir, 'data');

    const result = await runCli(['run', file, '--data-dir', data], { cwd: dir, env });

    expect(result.code).toBe(2);
    expect(result.stderr).toContain('resources.image_id: expected docker to be usable here');
    expect(readdirSync(join(data, 'sources'))).toEqual([]);
    expect(existsSync(join(data, 'buckets', 'fresh-outputs'))).toBe(false);
    expect(existsSync(join(data, 'buckets', '.created', 'fresh-outputs'))).toBe(false);
  });

  it(
    'runs in the container where docker can, and the container is removed when the node goes',
    async () => {
      const dir = await tempDir('docker-usable');
      const file = await writeTask(dir, 'task.yaml', TASK);
      const log = join(dir, 'docker.log');
      const env = { PATH: standInDocker(dir), DOCKER_LOG: log };

      const result = await runCli(['run', file, '--json', '--data-dir', join(dir, 'data')], { cwd: dir, env });

      expect(result.code, result.stderr).toBe(0);
      const view = parseStdout<JobView>(result);
      const calls = readFileSync(log, 'utf8').trimEnd().split('\n');
      const container = `relaunch-local-${view.jobId}-1-0`;
      expect(calls.filter((call) => !call.startsWith('info'))).toEqual([
        'image inspect ubuntu:22.04',
        'pull ubuntu:22.04',
        `rm -f ${container}`,
        expect.stringMatching(new RegExp(`^run -d --name ${container} --network host --ipc host --ulimit memlock=-1 --stop-timeout 10 -v .* --entrypoint bash ubuntu:22.04 -c .*$`)),
        expect.stringMatching(new RegExp(`^exec -i -w .* ${container} bash -c .* setup$`)),
        expect.stringMatching(new RegExp(`^exec -i -w .* ${container} bash -c .* run$`)),
        `rm -f ${container}`,
        `rm -f ${container}`,
      ]);
      const logs = await runCli(['logs', view.jobId, '--data-dir', join(dir, 'data')], { cwd: dir, env });
      expect(logs.stdout).toContain('in container: yes');
    },
    SLOW,
  );
});
