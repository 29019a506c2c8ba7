// The real SkyPilot task files in ../shared/corpus/skypilot: each accepted or rejected by name, never a crash.

import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { formatIssue, InvalidTaskSpecError } from '../../../../lib/errors.ts';
import { parseJobFile } from '../../../../lib/task-file/parse.ts';

const REPO_ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
const CORPUS = path.resolve(REPO_ROOT, '../shared/corpus/skypilot');
const PRESENT = existsSync(CORPUS);

/**
 * What relaunch makes of each file, pinned: accepted, or exactly these issues. Every
 * rejection names what relaunch does not do: a SkyPilot key it does not support yet, a
 * pipeline, a cloud other than AWS, a Docker or SkyPilot-catalog image, DYNAMIC_NODE_SET
 * and its min_nodes (in no SkyPilot release: an unknown strategy and an unknown key),
 * a storage mode other than COPY, MOUNT or MOUNT_CACHED, or a Jinja template placeholder.
 */
const OUTCOMES: Readonly<Record<string, 'accepted' | readonly string[]>> = {
  '01-managed-jobs-retry.yaml': 'accepted',
  '02-managed-job-with-storage.yaml': 'accepted',
  '03-jax-fault-tolerant-job.yaml': [
    'resources.cloud: relaunch runs on AWS only, got kubernetes (line 4)',
    'resources.job_recovery.strategy: expected EAGER_NEXT_REGION or FAILOVER in any case, or a lowercase none, got "DYNAMIC_NODE_SET" (line 6)',
    'resources.job_recovery.min_nodes: unknown key (line 7)',
  ],
  '04-elastic-training-job-group.yaml': [
    'execution: expected serial or nothing (relaunch runs a pipeline\'s tasks in order), got "parallel": job groups (execution: parallel) are not supported (line 17)',
    'primary_tasks: not supported by relaunch: it names a job group\'s primary tasks, and relaunch runs a pipeline\'s tasks in order (line 18)',
    'task 1: resources.infra: relaunch runs on AWS only, got kubernetes (line 25)',
    'task 2: resources.infra: relaunch runs on AWS only, got kubernetes (line 43)',
    'task 2: resources.job_recovery.strategy: expected EAGER_NEXT_REGION or FAILOVER in any case, or a lowercase none, got "DYNAMIC_NODE_SET" (line 47)',
    'task 2: resources.job_recovery.min_nodes: unknown key (line 48)',
  ],
  '05-multi-accel-unordered-any-of.yaml': 'accepted',
  '06-multiple-resources-any-of.yaml': 'accepted',
  '07-serve-multi-accelerators-ordered.yaml': [
    'service: not supported by relaunch yet (a SkyPilot key) (line 5)',
    'resources.cloud: relaunch runs on AWS only, got gcp (line 18)',
  ],
  '08-external-lb-llm-ordered.yaml': [
    'service: not supported by relaunch yet (a SkyPilot key) (line 10)',
  ],
  '09-deepseek-r1-671b.yaml': [
    'service: not supported by relaunch yet (a SkyPilot key) (line 43)',
  ],
  '10-kimi-k2.yaml': [
    'service: not supported by relaunch yet (a SkyPilot key) (line 69)',
  ],
  '11-gpt-oss-vllm.yaml': [
    'resources.infra: relaunch runs on AWS only, got nebius (line 2)',
    'service: not supported by relaunch yet (a SkyPilot key) (line 29)',
  ],
  '12-llama3-serve.yaml': [
    'service: not supported by relaunch yet (a SkyPilot key) (line 60)',
  ],
  '13-vllm-service-with-auth.yaml': [
    'service: not supported by relaunch yet (a SkyPilot key) (line 3)',
  ],
  '14-pvc-volume.yaml': [
    'volumes: not supported by relaunch yet (a SkyPilot key) (line 7)',
  ],
  '15-k8s-pod-config.yaml': [
    'resources.cloud: relaunch runs on AWS only, got kubernetes (line 2)',
    'config: not supported by relaunch yet (a SkyPilot key) (line 4)',
  ],
  '16-k8s-remote-identity-none.yaml': [
    'config: not supported by relaunch yet (a SkyPilot key) (line 1)',
  ],
  '17-efa-container.yaml': 'accepted',
  '18-aws-ami-and-docker.yaml': 'accepted',
  '19-gcp-per-region-images.yaml': [
    'resources.cloud: relaunch runs on AWS only, got gcp (line 2)',
    'resources.image_id.us-central1: expected an AWS region such as us-east-1 (or docker) as the key, got "us-central1" (line 4)',
    'resources.image_id.us-east5: expected an AWS region such as us-east-1 (or docker) as the key, got "us-east5" (line 5)',
  ],
  '20-http-server-service.yaml': [
    'service: not supported by relaunch yet (a SkyPilot key) (line 9)',
  ],
  '21-distributed-pytorch.yaml': 'accepted',
  '22-pipeline-aws.yaml': 'accepted',
  '23-bert-qa-train-eval.yaml': 'accepted',
  '24-mixed-list-accelerators.yaml': 'accepted',
  '25-vicuna-train.yaml': 'accepted',
  '26-spot-bert-qa-legacy.yaml': 'accepted',
  '27-k8s-termination-hook-autostop.yaml': [
    'resources.cloud: relaunch runs on AWS only, got kubernetes (line 5)',
    'resources.autostop: not supported by relaunch yet (a SkyPilot key) (line 7)',
    'resources.termination_hook: not supported by relaunch yet (a SkyPilot key) (line 10)',
  ],
  '28-torchtitan.yaml': 'accepted',
  '29-autoresearch-experiment.yaml': 'accepted',
  '30-rclone-mount-templated.yaml': [
    'file_mounts["/mount_private_rclone"].name: expected a YAML value, got the template placeholder {{storage_name}} (render the template first) (line 4)',
    'file_mounts["/mount_private_rclone"].store: expected a YAML value, got the template placeholder {{store_type}} (render the template first) (line 6)',
    'file_mounts["/mount_private_rclone"].mode: expected one of COPY, MOUNT, MOUNT_CACHED, got "RCLONE" (line 7)',
  ],
};

/** What the corpus's expected.json says of a file (among other things): whether it holds several documents. */
interface CorpusFacts {
  readonly multi_doc: boolean;
}

/** The outcome of parsing one file: accepted, the issues, or (a bug) anything else thrown. */
function outcomeOf(text: string): 'accepted' | string[] {
  try {
    parseJobFile(text);
    return 'accepted';
  } catch (error) {
    if (error instanceof InvalidTaskSpecError) return error.issues.map(formatIssue);
    throw error;
  }
}

describe.skipIf(!PRESENT)(`SkyPilot corpus${PRESENT ? '' : ` (skipped: ${CORPUS} is absent)`}`, () => {
  const files = PRESENT ? readdirSync(CORPUS).filter((file) => file.endsWith('.yaml')).sort() : [];
  const facts = PRESENT
    ? (JSON.parse(readFileSync(path.join(CORPUS, 'expected.json'), 'utf8')) as Record<string, CorpusFacts>)
    : {};
  const read = (file: string) => readFileSync(path.join(CORPUS, file), 'utf8');

  it('has an outcome pinned for every file, and no pin for a file that is gone', () => {
    expect(files).toEqual(Object.keys(OUTCOMES).sort());
  });

  it.each(files)('%s: accepted or rejected exactly as pinned, never with another exception', (file) => {
    expect(outcomeOf(read(file))).toEqual(OUTCOMES[file]);
  });

  it.each(files)('%s: a multi-document file is read as a pipeline, each problem under its task', (file) => {
    const outcome = outcomeOf(read(file));
    if (facts[file]?.multi_doc === true) {
      if (outcome !== 'accepted') {
        for (const issue of outcome) expect(issue).toMatch(/^(task \d+(: |$)|execution:|primary_tasks:)/);
      }
    } else {
      expect(outcome === 'accepted' || outcome.every((issue) => !/^task \d+/.test(issue))).toBe(true);
    }
  });

  it.each(files)('%s: every key named as unsupported is a key the file really has', (file) => {
    const text = read(file);
    const outcome = outcomeOf(text);
    const named = outcome === 'accepted' ? [] : outcome.filter((issue) => issue.includes(': not supported by relaunch yet'));
    for (const issue of named) {
      const key = issue.slice(0, issue.indexOf(': not supported')).split('.').at(-1) as string;
      expect(text).toMatch(new RegExp(`^\\s*${key}:`, 'm'));
    }
  });
});
