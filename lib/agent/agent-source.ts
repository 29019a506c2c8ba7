// The agent's shell program as text, read from agent.sh beside this module. A Lambda bundle
// has no file beside it: infra/bundle.ts puts the text in the bundle in place of this module.

import { readFileSync } from 'node:fs';

/** agent.sh, as written (comments and all). */
export const AGENT_SOURCE: string = readFileSync(new URL('./agent.sh', import.meta.url), 'utf8');
