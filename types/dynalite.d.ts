// dynalite 4.0.0 ships no type declarations; this declares the one function relaunch calls.

declare module 'dynalite' {
  import type { Server } from 'node:http';

  /** Options of dynalite's factory (those relaunch uses). */
  interface DynaliteOptions {
    /** A folder for the LevelDB store; in memory when absent. */
    readonly path?: string;
    /** How long a new table stays CREATING; 500 by default. */
    readonly createTableMs?: number;
    /** How long a deleted table stays DELETING; 500 by default. */
    readonly deleteTableMs?: number;
    /** How long an updated table stays UPDATING; 500 by default. */
    readonly updateTableMs?: number;
    readonly maxItemSizeKb?: number;
    readonly verbose?: boolean;
    readonly debug?: boolean;
  }

  /** An HTTP server that speaks DynamoDB's JSON API; `close` also closes the store. */
  function dynalite(options?: DynaliteOptions): Server;
  export default dynalite;
}
