// Reading a task file, or standard input for `-`: only a regular file or a stream of at most
// the API's body limit, only UTF-8; anything else is bad input named in the message.

import type { Stats } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { InvalidInputError } from '../lib/errors.ts';
import { MAX_BODY_BYTES } from '../lib/http/handle.ts';
import { decodeUtf8 } from '../lib/http/utf8.ts';

/** The argument that means "read the task from standard input". */
export const STDIN_ARGUMENT = '-';

/** How standard input is named in messages. */
const STDIN_NAME = 'standard input';

/** How messages name where a task came from: the path, or `standard input` for `-`. */
export function taskSourceName(file: string): string {
  return file === STDIN_ARGUMENT ? STDIN_NAME : file;
}

/**
 * The task's text, from a file or (for `-`) standard input.
 *
 * A path is checked before anything is read: it must be a regular file (a device such as
 * /dev/zero, a FIFO or a socket could be read forever) of at most MAX_BODY_BYTES, the most
 * the API accepts. Standard input is read up to one byte past that limit and refused
 * beyond it. The bytes must be UTF-8.
 *
 * @throws InvalidInputError (exit status 2) naming the file, or standard input, and what
 *   is wrong: missing, a directory, not a regular file, too large, not readable (with the
 *   system's reason), or not UTF-8 (with the offset of the first bad byte).
 */
export async function readTaskFile(file: string): Promise<string> {
  const bytes = file === STDIN_ARGUMENT ? await readStdin() : await readRegularFile(file);
  return decodeUtf8(bytes, taskSourceName(file));
}

async function readRegularFile(file: string): Promise<Uint8Array> {
  const info = await stat(file).catch((error: unknown) => refuse(file, reasonOf(error)));
  checkKind(file, info);
  const handle = await open(file, 'r').catch((error: unknown) => refuse(file, reasonOf(error)));
  try {
    // Read through the limit, not to the size stat saw: the file may grow meanwhile.
    const buffer = Buffer.alloc(MAX_BODY_BYTES + 1);
    let length = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, null);
      if (bytesRead === 0) break;
      length += bytesRead;
      if (length > MAX_BODY_BYTES) refuse(file, tooLarge(`more than ${MAX_BODY_BYTES}`));
    }
    return buffer.subarray(0, length);
  } catch (error) {
    if (error instanceof InvalidInputError) throw error;
    return refuse(file, reasonOf(error));
  } finally {
    await handle.close();
  }
}

function checkKind(file: string, info: Stats): void {
  if (info.isDirectory()) refuse(file, 'is a directory, expected a task file');
  if (!info.isFile()) refuse(file, `is ${kindOf(info)}, expected a regular file (give - to read standard input)`);
  if (info.size > MAX_BODY_BYTES) refuse(file, tooLarge(String(info.size)));
}

/** Standard input up to one byte past the limit; what lies beyond is never read. */
async function readStdin(): Promise<Uint8Array> {
  const chunks: Buffer[] = [];
  let length = 0;
  try {
    for await (const chunk of process.stdin as AsyncIterable<Buffer>) {
      chunks.push(chunk);
      length += chunk.length;
      if (length > MAX_BODY_BYTES) refuse(STDIN_NAME, tooLarge(`more than ${MAX_BODY_BYTES}`));
    }
  } catch (error) {
    if (error instanceof InvalidInputError) throw error;
    refuse(STDIN_NAME, reasonOf(error));
  } finally {
    // Ending the loop early leaves a pipe or a device open, which would keep the process up.
    process.stdin.destroy();
  }
  return Buffer.concat(chunks, length);
}

function tooLarge(bytes: string): string {
  return `expected a task of at most ${MAX_BODY_BYTES} bytes (the API's limit), got ${bytes} bytes`;
}

function kindOf(info: Stats): string {
  if (info.isCharacterDevice()) return 'a character device';
  if (info.isBlockDevice()) return 'a block device';
  if (info.isFIFO()) return 'a FIFO (named pipe)';
  if (info.isSocket()) return 'a socket';
  return 'not a regular file';
}

/** What a failed stat, open or read says, in words; the code for anything unforeseen. */
function reasonOf(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  switch (code) {
    case 'ENOENT':
      return 'no such file';
    case 'ENOTDIR':
      return 'no such file (a part of the path is not a folder)';
    case 'EISDIR':
      return 'is a directory, expected a task file';
    case 'EACCES':
    case 'EPERM':
      return 'permission denied: relaunch may not read it';
    case 'ELOOP':
      return 'cannot be read: too many symbolic links (a loop?)';
    case 'ENAMETOOLONG':
      return 'cannot be read: the path is too long';
    default:
      return `cannot be read: ${error instanceof Error ? error.message : String(error)}`;
  }
}

function refuse(where: string, message: string): never {
  throw new InvalidInputError([{ path: where, message }]);
}
