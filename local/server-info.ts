// `<dataDir>/server.json`: where the runtime that owns a data folder serves its API, so
// other commands on the same folder talk to it instead of opening the database twice.

import { readFileSync } from 'node:fs';
import path from 'node:path';

/** What `server.json` holds. */
export interface ServerInfo {
  readonly url: string;
  readonly pid: number;
}

/** Where the runtime of a data folder says it serves. */
export function serverInfoPath(dataDir: string): string {
  return path.join(path.resolve(dataDir), 'server.json');
}

/** The live server of a data folder, if one is running (its process exists). */
export function findLocalServer(dataDir: string): ServerInfo | null {
  let info: ServerInfo;
  try {
    info = JSON.parse(readFileSync(serverInfoPath(dataDir), 'utf8')) as ServerInfo;
  } catch {
    return null;
  }
  try {
    process.kill(info.pid, 0);
    return info;
  } catch {
    return null;
  }
}

