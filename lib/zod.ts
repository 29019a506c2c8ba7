// zod for every schema of relaunch: zod/mini, with zod's English messages. Classic `zod`
// cannot be tree-shaken (its methods come with every schema): it put ~443 KiB and ~75 ms
// of init into every Lambda bundle; zod/mini is the same core and the same issues, as
// functions, at about 30 KiB in each (BENCHMARKS.md). Unlike classic zod, zod/mini sets no locale (every message would
// read "Invalid input"), so importing this module sets English, once, before any parse.
//
// Import it as a namespace, `import * as z from '../zod.ts'`: the bundler then keeps only
// the functions used. `import { z }` (zod's own namespace object) keeps all of zod/mini;
// eslint.config.mjs refuses it, and refuses 'zod' itself outside this file.

import { config } from 'zod/mini';
import en from 'zod/v4/locales/en.js';

config(en());

export * from 'zod/mini';
