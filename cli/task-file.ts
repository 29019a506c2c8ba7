// Reading a task file from disk: a missing or unreadable file is bad input, named in the message.

import { readFile } from 'node:fs/promises';
import { InvalidInputError } from '../lib/errors.ts';

/** The file's text; a missing or unreadable file is InvalidInputError (status 2), not a crash. */
export async function readTaskFile(file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const message =
      code === 'ENOENT'
        ? 'no such file'
        : code === 'EISDIR'
          ? 'is a directory, expected a task file'
          : `cannot be read (${String(code)})`;
    throw new InvalidInputError([{ path: file, message }]);
  }
}
