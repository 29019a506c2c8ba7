// lib/zod.ts: zod/mini, which has no messages of its own, with zod's English ones set.

import { describe, expect, it } from 'vitest';
import * as z from '../../../lib/zod.ts';

describe('lib/zod.ts', () => {
  it("gives zod's English messages, not zod/mini's bare 'Invalid input'", () => {
    const result = z.object({ name: z.string() }).safeParse({ name: 1 });
    expect(result.error?.issues.map((issue) => issue.message)).toEqual(['Invalid input: expected string, received number']);
  });
});
