// sweepLaunchTemplates: templates a launch left behind go once the grace period is over.

import { describe, expect, it } from 'vitest';
import type { LaunchTemplateInventory, TaggedLaunchTemplate } from '../../../../lib/ports.ts';
import { SWEEP_GRACE_SECONDS } from '../../../../lib/usecases/sweep-instances.ts';
import { sweepLaunchTemplates } from '../../../../lib/usecases/sweep-launch-templates.ts';

const NOW = new Date('2026-03-01T12:00:00.000Z');
const ago = (seconds: number): string => new Date(NOW.getTime() - seconds * 1000).toISOString();
const template = (templateId: string, createdAt: string | null): TaggedLaunchTemplate => ({ templateId, region: 'us-east-1', jobId: 'j-a', createdAt });

/** Templates the test lists; deleting one in `refuse` fails. */
class ListedTemplates implements LaunchTemplateInventory {
  readonly deleted: string[] = [];
  constructor(
    private readonly listed: readonly TaggedLaunchTemplate[],
    private readonly refuse: ReadonlySet<string> = new Set(),
  ) {}
  async listTagged(): Promise<TaggedLaunchTemplate[]> {
    return [...this.listed];
  }
  async delete(found: TaggedLaunchTemplate): Promise<void> {
    if (this.refuse.has(found.templateId)) throw new Error(`cannot delete ${found.templateId}`);
    this.deleted.push(found.templateId);
  }
}

describe('sweepLaunchTemplates', () => {
  it('deletes templates older than the grace period, keeps young ones and those of unknown age', async () => {
    const templates = new ListedTemplates([template('lt-old', ago(SWEEP_GRACE_SECONDS + 1)), template('lt-young', ago(60)), template('lt-unknown', null)]);

    const result = await sweepLaunchTemplates({ templates, clock: { now: () => NOW } });

    expect(templates.deleted).toEqual(['lt-old']);
    expect(result).toEqual({ checked: 3, deleted: [template('lt-old', ago(SWEEP_GRACE_SECONDS + 1))], failed: [] });
  });

  it('reports a delete that failed and goes on with the rest', async () => {
    const old = ago(SWEEP_GRACE_SECONDS * 2);
    const templates = new ListedTemplates([template('lt-1', old), template('lt-2', old)], new Set(['lt-1']));

    const result = await sweepLaunchTemplates({ templates, clock: { now: () => NOW } });

    expect(templates.deleted).toEqual(['lt-2']);
    expect(result.failed).toEqual([{ ...template('lt-1', old), error: 'cannot delete lt-1' }]);
  });
});
