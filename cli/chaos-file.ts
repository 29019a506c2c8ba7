// Reading a chaos file (`--chaos FILE`, or standard input for `-`) as a task file is read,
// then parsing it (lib/chaos-file/).

import { stat } from 'node:fs/promises';
import { parseChaosFile } from '../lib/chaos-file/parse.ts';
import { MAX_CHAOS_FILE_BYTES, type ChaosPlan } from '../lib/chaos-file/types.ts';
import { InvalidInputError } from '../lib/errors.ts';
import { readTaskFile } from './task-file.ts';

/**
 * Reads and parses a chaos file (`-`: standard input), through readTaskFile.
 *
 * @throws InvalidInputError naming the file when it is missing, unreadable, a directory,
 *   not a regular file, larger than MAX_CHAOS_FILE_BYTES or not UTF-8; else as parseChaosFile.
 */
export async function readChaosFile(file: string): Promise<ChaosPlan> {
  // Checked here too, to word these two for a chaos file; readTaskFile refuses the rest
  // (devices, pipes, bytes that are not UTF-8) and reads standard input for `-`.
  const info = await stat(file).catch(() => null);
  if (info?.isDirectory() === true) throw new InvalidInputError([{ path: file, message: 'is a directory, expected a chaos file' }]);
  if (info !== null && info.isFile() && info.size > MAX_CHAOS_FILE_BYTES) {
    throw new InvalidInputError([{ path: file, message: `expected a chaos file of at most ${MAX_CHAOS_FILE_BYTES} bytes, got ${info.size} bytes` }]);
  }
  return parseChaosFile(await readTaskFile(file));
}
