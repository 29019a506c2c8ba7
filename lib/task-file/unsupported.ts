// Keys relaunch does not take: SkyPilot's not supported yet, and unknown ones.

/** The mappings whose keys are checked: the task itself and the sections inside it. */
export type Section = 'task' | 'resources' | 'job_recovery' | 'restart_backoff' | 'candidate';

/** Where each section sits, as a path prefix for "did you mean" suggestions. */
const SECTION_PREFIX: Readonly<Record<Section, string>> = {
  task: '',
  resources: 'resources.',
  job_recovery: 'resources.job_recovery.',
  restart_backoff: 'resources.job_recovery.restart_backoff.',
  candidate: 'resources.any_of[i].',
};

/**
 * SkyPilot task keys relaunch does not support yet, per section (SkyPilot's task and
 * resources schemas, including keys older and newer versions accept). A file using one is
 * rejected with the key named, rather than run without what it asked for.
 */
export const UNSUPPORTED_KEYS: Readonly<Record<Section, ReadonlySet<string>>> = {
  task: new Set([
    'service', 'volumes', 'config', 'event_callback', 'inputs',
    'outputs', 'file_mounts_mapping', 'storage_mounts', 'execution', 'primary_tasks', 'pool',
    'volume_mounts', 'managed_secrets', 'api_server_access', 'experimental', '_metadata',
  ]),
  resources: new Set([
    'labels', 'autostop',
    'termination_hook', 'accelerator_args', 'volumes', 'ephemeral_storage', 'local_disk',
    'max_hourly_cost', 'container_image', 'priority', 'priority_class',
    '_cluster_config_overrides', '_docker_login_config', '_is_image_managed', '_requires_fuse',
    '_no_missing_accel_warnings', '_resolved_container_image',
  ]),
  // Not min_nodes, nor the DYNAMIC_NODE_SET strategy it goes with: no SkyPilot release has
  // either, so they are unknown keys here.
  job_recovery: new Set(),
  restart_backoff: new Set(),
  candidate: new Set(),
};

/** Keys compared for suggestions: case and `-` versus `_` never matter. */
function normalized(key: string): string {
  return key.toLowerCase().replaceAll('-', '_');
}

/** Edit distance counting a swap of two neighbours as one edit (optimal string alignment). */
export function editDistance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  const at = (i: number, j: number): number => (rows[i] as number[])[j] as number;
  for (let i = 1; i <= a.length; i += 1) {
    for (let j = 1; j <= b.length; j += 1) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, at(i - 2, j - 2) + 1);
      (rows[i] as number[])[j] = best;
    }
  }
  return at(a.length, b.length);
}

/** The closest supported key, if one is close enough to be a likely typo. */
function closest(key: string, candidates: readonly string[]): string | undefined {
  const wanted = normalized(key);
  const allowed = Math.max(1, Math.min(3, Math.floor(wanted.length / 4)));
  let best: { key: string; distance: number } | undefined;
  for (const candidate of candidates) {
    const distance = editDistance(wanted, normalized(candidate));
    if (distance <= allowed && (best === undefined || distance < best.distance)) best = { key: candidate, distance };
  }
  return best?.key;
}

/**
 * The message for a key a section does not accept: a SkyPilot key relaunch does not
 * support yet; a supported key in the wrong section (`cpus` at the top level); a likely typo of a
 * supported key; or an unknown key.
 */
export function unknownKeyMessage(
  section: Section,
  key: string,
  supported: Readonly<Record<Section, readonly string[]>>,
): string {
  if (UNSUPPORTED_KEYS[section].has(key)) return 'not supported by relaunch yet (a SkyPilot key)';
  if (section === 'candidate' && (supported.resources.includes(key) || UNSUPPORTED_KEYS.resources.has(key))) {
    return `not taken inside any_of or ordered: relaunch varies only ${supported.candidate.join(', ')} between candidates; set ${key} once, outside the list`;
  }
  const home = (Object.keys(supported) as Section[]).find((other) => supported[other].includes(key));
  if (home !== undefined) return `unknown key here, did you mean \`${SECTION_PREFIX[home]}${key}\`?`;
  const typo = closest(key, supported[section]);
  return typo === undefined ? 'unknown key' : `unknown key, did you mean \`${typo}\`?`;
}
