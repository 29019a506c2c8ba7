// Writing a file so that a reader finds it whole or not at all: under a temporary name
// first, then renamed into place (a rename within a folder is atomic).

import { renameSync, writeFileSync } from 'node:fs';

/** Writes `contents` to `file` whole, with `mode` when given (the temporary file's, which the rename keeps). */
export function writeWhole(file: string, contents: string | Uint8Array, mode?: number): void {
  const temporary = `${file}.${process.pid}.tmp`;
  writeFileSync(temporary, contents, mode === undefined ? undefined : { mode });
  renameSync(temporary, file);
}
