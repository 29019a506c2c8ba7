// The agent as instances get it, checked by shellcheck at its default severity: the script
// rendered for each kind of node with the shipper's program the API serves (which a node
// loads into it), not only the source it is rendered from (the renderer strips comments but
// for shellcheck's directives). The rendered script turns off only the checks that quoted
// text triggers (script.ts).

import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { renderAgentScript, AGENT_LIBRARY, type AgentScriptParams } from '../../../../lib/agent/script.ts';
import { spec } from '../../../support/agent-harness.ts';

const folder = mkdtempSync(join(tmpdir(), 'relaunch-shellcheck-'));
afterAll(() => rmSync(folder, { recursive: true, force: true }));

const BASE: AgentScriptParams = {
  apiUrl: 'https://abcdefghij.execute-api.us-east-1.amazonaws.com/v1/',
  jobId: 'j-shellcheck',
  attempt: 1,
  secretSource: { path: '/relaunch/agent-secrets', region: 'us-east-1', endpoint: 'https://ssm.us-east-1.amazonaws.com' },
  spec: spec({ envs: { LR: '0.1' } }),
  heartbeatSeconds: 60,
};

/** Text shellcheck would read as code were it not quoted. */
const HOSTILE = `'; touch pwned; '\nEOF\n$(whoami) \`id\` it\\'s \\\\ ~/x $HOME \${A:-b} "q" é 日本\ttab`;

const NODES: [string, AgentScriptParams][] = [
  ['one node', BASE],
  ['a node of four, with S3 data and every kind of mount', {
    ...BASE,
    spec: spec({ numNodes: 4, workdir: '.' }),
    dataCredentials: true,
    sourcesUrl: 's3://stack-bucket/sources',
    mounts: [
      { kind: 'upload', entry: 'dir', sha256: 'ab'.repeat(32), dest: '~/sky_workdir' },
      { kind: 's3-copy', bucket: 'datasets', key: 'train/', dest: '/data/train' },
      { kind: 's3-mount', bucket: 'ckpt', prefix: 'run-1', cached: true, dest: '/ckpt' },
      { kind: 'git', url: 'https://example.com/repo.git', ref: 'v1', dest: '~/repo' },
    ],
  }],
  ['a GPU node with a container from ECR', { ...BASE, spec: spec({}, { containerImage: '123456789012.dkr.ecr.us-west-2.amazonaws.com/team/model:1' }), gpusPerNode: 8 }],
  ['a node whose setup, run, envs and mounts hold quotes, $, ~, backslashes and wide characters', {
    ...BASE,
    spec: spec({ setup: HOSTILE, run: `~/start.sh\n${HOSTILE}`, envs: { TEXT: HOSTILE } }),
    mounts: [{ kind: 'link', dir: `/data/$HOME/'x'`, dest: '~/data' }],
  }],
  ['a local node', { ...BASE, nodeRank: 0, nodeIps: ['127.0.0.1'], shutdownCommand: ": >'/tmp/node/shutdown'; exit 0", jobHome: '/tmp/home', mountRoot: '/tmp/root' }],
  ['a node that ships its output to CloudWatch Logs', { ...BASE, logs: { group: '/relaunch/jobs', region: 'us-east-1' } }],
  ['a node the task may reuse for its next attempt (FAILOVER)', { ...BASE, spec: spec({}, { jobRecovery: { ...BASE.spec.resources.jobRecovery, strategy: 'FAILOVER' } }) }],
];

describe('the rendered agent', () => {
  it('is shellcheck on this machine (apt-get install -y shellcheck; .ci/run installs it)', () => {
    expect(spawnSync('shellcheck', ['--version']).status).toBe(0);
  });

  it.each(NODES)('passes shellcheck for %s', (name, params) => {
    const file = join(folder, `${name.replace(/\W+/g, '-')}.sh`);
    // With the shipper's program the API serves, which a node loads into the agent before it ships.
    const agent = renderAgentScript(params);
    const main = agent.lastIndexOf('main "$@"');
    writeFileSync(file, `${agent.slice(0, main)}${AGENT_LIBRARY.program}${agent.slice(main)}`);
    const checked = spawnSync('shellcheck', ['--shell=bash', file], { encoding: 'utf8' });
    expect(checked.stdout + checked.stderr).toBe('');
    expect(checked.status).toBe(0);
  });

  it('is the source with its settings filled in: shellcheck passes the source too', () => {
    expect(execFileSync('shellcheck', ['--shell=bash', join(import.meta.dirname, '../../../../lib/agent/agent.sh')], { encoding: 'utf8' })).toBe('');
  });
});
