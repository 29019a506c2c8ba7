// The normalized task spec: one shape for every form a SkyPilot task file can take.

import type { ImageAlias } from './image-id.ts';
import type { FileMount, GitWorkdir } from './mounts.ts';

/** Where to relaunch after an attempt dies. */
export type RecoveryStrategy = 'EAGER_NEXT_REGION' | 'FAILOVER';

/** Delay between relaunches: initial * factor^k seconds, capped, optionally jittered. */
export interface RestartBackoff {
  readonly initialSeconds: number;
  readonly factor: number;
  readonly maxSeconds: number;
  /** `full`: a uniform draw in [0, delay]; `none`: the delay itself. */
  readonly jitter: 'full' | 'none';
}

/** `resources.job_recovery`, normalized (DESIGN.md section 1). */
export interface RecoveryPolicy {
  readonly strategy: RecoveryStrategy;
  /** M: restarts allowed after ordinary user-code failures. */
  readonly maxRestartsOnErrors: number;
  /** Exit codes that always restart; ranges expanded; sorted, unique. */
  readonly recoverOnExitCodes: readonly number[];
  /** Exit codes that fail the job at once; sorted, unique. */
  readonly failOnExitCodes: readonly number[];
  /** Cap on restarts caused by recoverOnExitCodes; null = unlimited (SkyPilot's behaviour). */
  readonly maxRestartsOnExitCodes: number | null;
  /** null = relaunch at once. */
  readonly restartBackoff: RestartBackoff | null;
  /** After this many preemptions in a row, relaunch on-demand; null = never. */
  readonly onDemandFallbackAfter: number | null;
  /*
   * relaunch's runaway bounds. The parser always sets them; they are optional only because
   * a job stored before they existed has none, and an absent one means its default.
   */
  /**
   * How long a recovery may wait for capacity (seconds since its first launch that found
   * none) before the job ends FAILED_NO_RESOURCE; null or absent = no limit (SkyPilot's
   * behaviour).
   */
  readonly launchTimeoutSeconds?: number | null;
  /**
   * How long after the launch every node's first heartbeat may take, in seconds; absent =
   * DEFAULT_BOOT_TIMEOUT_SECONDS (10 minutes). An attempt with a node not heard from by
   * then is LOST as never booted.
   */
  readonly bootTimeoutSeconds?: number;
  /**
   * Attempts in a row that never ran the job before it ends: a node's first heartbeat
   * missing after bootTimeoutSeconds (then FAILED_NO_RESOURCE), or a node's agent failing
   * one of its own steps before setup (then FAILED_SETUP); absent =
   * DEFAULT_MAX_BOOT_FAILURES (3).
   */
  readonly maxBootFailures?: number;
  /** Cap on RECOVER decisions (preemptions, lost instances, agents that failed); null or absent = no cap. */
  readonly maxRecoveries?: number | null;
  /**
   * Which of EC2's warnings start the next attempt early, as a standby that runs setup and
   * holds before run: `true`, the spot interruption warning; `rebalance`, also the earlier
   * rebalance recommendation; `false` or absent, none (the attempt launches once the
   * warned one has ended and been decided, as SkyPilot does).
   */
  readonly launchOnWarning?: LaunchOnWarning;
  /**
   * `reuse_nodes`: whether a relaunch runs on the attempt's healthy nodes again (restart
   * in place, replace only the lost ones), and whether setup runs again there; null or
   * absent: the strategy's default (FAILOVER reuses and reruns setup, as SkyPilot does;
   * EAGER_NEXT_REGION launches fresh nodes). lib/reuse-rules.ts `reuseChoice`.
   */
  readonly reuseNodes?: ReuseNodes | null;
  /**
   * `bad_node_exit_codes`: exit codes that say the node itself is bad (a GPU health check
   * that exits 42): the node that exited with one is replaced, the others kept. Sorted,
   * unique; absent or empty: none.
   */
  readonly badNodeExitCodes?: readonly number[];
}

/** Whether setup runs again on a node a relaunch kept. */
export type ReuseSetup = 'rerun' | 'skip';

/** `reuse_nodes`, as parsed: `true` is `{reuse: true, setup: 'rerun'}`. */
export interface ReuseNodes {
  readonly reuse: boolean;
  readonly setup: ReuseSetup;
}

/** `launch_on_warning`, as the file writes it. */
export type LaunchOnWarning = boolean | 'rebalance';

/** One accelerator choice: `A100:8` is `{ name: 'A100', count: 8 }`. */
export interface Accelerator {
  readonly name: string;
  readonly count: number;
}

/** `cpus: 4+` is `{ value: 4, orMore: true }`; `cpus: 4` is `{ value: 4, orMore: false }`. */
export interface Quantity {
  readonly value: number;
  readonly orMore: boolean;
}

/**
 * The machine image: one AMI for every region, one of SkyPilot's image aliases (resolved
 * per region and architecture), or one per region (an AMI id or `skypilot:ALIAS` each).
 */
export type ImageId =
  | { readonly kind: 'ami'; readonly imageId: string }
  | { readonly kind: 'alias'; readonly alias: ImageAlias }
  | { readonly kind: 'per-region'; readonly byRegion: Readonly<Record<string, string>> };

/** One port or a range of them (`8080`, `8080-8090`): from <= to, both 1-65535. */
export interface PortRange {
  readonly from: number;
  readonly to: number;
}

/** `network_tier`: `best` asks for EFA on instance types that have it; `standard` is EC2's default network. */
export type NetworkTier = 'standard' | 'best';

/**
 * One entry of `any_of` or `ordered`: the fields it changes of the outer resources (a
 * field left out keeps the outer value). Placement, machine and market only: the rest
 * (disk, image, recovery, ports) is the task's, whichever candidate runs it.
 */
export interface ResourceOption {
  /** Its position in the file's list (entries for other clouds are left out, so positions may skip). */
  readonly index?: number;
  /** Given with `zone` (or `infra`): both replace the outer ones together. */
  readonly region?: string | null;
  readonly zone?: string | null;
  readonly instanceType?: string;
  readonly cpus?: Quantity;
  readonly memoryGb?: Quantity;
  readonly accelerators?: readonly Accelerator[];
  /** This entry's market: its own `use_spot`, else the outer one (the parser always sets it). */
  readonly useSpot?: boolean;
}

/**
 * `resources.any_of` (any one will do; relaunch lets EC2 pick the cheapest or the one with
 * capacity) or `resources.ordered` (in preference order). Entries for other clouds are
 * dropped at parse time (with a warning): `options` holds AWS ones only, at least one.
 */
export interface ResourceAlternatives {
  readonly mode: 'any_of' | 'ordered';
  readonly options: readonly ResourceOption[];
}

/** `resources`, normalized. The cloud is always AWS. */
export interface Resources {
  readonly cloud: 'aws';
  readonly region: string | null;
  readonly zone: string | null;
  readonly instanceType: string | null;
  readonly cpus: Quantity | null;
  readonly memoryGb: Quantity | null;
  /** Candidates, any one of which will do; empty when no accelerator is asked for. */
  readonly accelerators: readonly Accelerator[];
  /**
   * Whether the task may use spot: the outer `use_spot`, or, with `any_of`/`ordered`,
   * whether any candidate asks for it (each candidate keeps its own market).
   */
  readonly useSpot: boolean;
  readonly diskSizeGb: number | null;
  /** How fast the root volume is (`disk_tier`); absent: gp3's baseline, as `low`. */
  readonly diskTier?: DiskTier;
  readonly imageId: ImageId | null;
  /** A Docker image setup and run run in (`image_id: docker:IMAGE`); absent: on the machine. */
  readonly containerImage?: string;
  readonly jobRecovery: RecoveryPolicy;
  /** `any_of` or `ordered`, when given: the candidates placement chooses among. */
  readonly alternatives?: ResourceAlternatives;
  /** `ports` to open to the job's nodes, merged and sorted; absent: none. */
  readonly ports?: readonly PortRange[];
  /** Absent: `standard`. */
  readonly networkTier?: NetworkTier;
}

/** SkyPilot's disk tiers; `best` is the fastest relaunch offers (`ultra`). */
export const DISK_TIERS = ['low', 'medium', 'high', 'ultra', 'best'] as const;
/** One of them. */
export type DiskTier = (typeof DISK_TIERS)[number];

/** A task file, parsed and normalized. */
export interface TaskSpec {
  readonly name: string | null;
  /**
   * A local folder as the file names it, copied to every node's ~/sky_workdir, where setup
   * and run start; once `run` has uploaded it, `upload:dir:sha256:<hex>` (lib/task-file/mounts.ts).
   */
  readonly workdir: string | null;
  /** SkyPilot's git workdir, cloned on every node instead. Absent: none. */
  readonly gitWorkdir?: GitWorkdir;
  /** `file_mounts`, in the file's order. Absent: none. */
  readonly fileMounts?: readonly FileMount[];
  readonly numNodes: number;
  /** Values are strings, as the job's environment holds them; a null in the file is ''. */
  readonly envs: Readonly<Record<string, string>>;
  readonly setup: string | null;
  readonly run: string | null;
  readonly resources: Resources;
  /**
   * The names of the task's `secrets`, sorted; their values are stored apart (JobSecrets)
   * and reach only the job's environment. Absent: none.
   */
  readonly secretNames?: readonly string[];
}

/** Something allowed but probably a mistake, shown at submit time. */
export interface SpecWarning {
  readonly path: string;
  readonly message: string;
  readonly line?: number;
}

/** A parse that succeeded: the spec, any warnings, and the secrets' values, kept out of the spec. */
export interface ParsedTask {
  readonly spec: TaskSpec;
  readonly warnings: readonly SpecWarning[];
  /** `secrets` as the file gives them: null for a value to give at submit. */
  readonly secrets: Readonly<Record<string, string | null>>;
}
