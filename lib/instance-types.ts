// The EC2 instance types relaunch can choose by itself, from cpus, memory and accelerators.
//
// A small table, not a price list: the common GPU types per accelerator, and the current
// general-purpose (m6i, m7i), compute (c7i) and memory (r7i) families for CPU-only tasks.
// Any other type can still be named with `resources.instance_type`. Memory is in GiB,
// which is what EC2 reports and what SkyPilot means by `memory`.

/** One GPU model and how many of it an instance has. */
export interface GpuCount {
  /** The canonical name, as SkyPilot spells it: `A100`, `A100-80GB`, `H100`. */
  readonly name: string;
  readonly count: number;
}

/** What relaunch knows about an instance type. */
export interface InstanceTypeInfo {
  readonly name: string;
  readonly vcpus: number;
  readonly memoryGib: number;
  /** null for a CPU-only type. */
  readonly gpu: GpuCount | null;
}

/** CPU architecture of an instance type, which picks the AMI. */
export type Architecture = 'x86_64' | 'arm64';

function gpuType(name: string, vcpus: number, memoryGib: number, gpu: string, count: number): InstanceTypeInfo {
  return { name, vcpus, memoryGib, gpu: { name: gpu, count } };
}

/**
 * GPU types by accelerator, smallest first within a model. Several sizes share a GPU count
 * (g5.xlarge to g5.16xlarge all have one A10G): they differ in vCPUs and memory, so a
 * task's `cpus`/`memory` pick among them.
 */
const GPU_TYPES: readonly InstanceTypeInfo[] = [
  gpuType('g4dn.xlarge', 4, 16, 'T4', 1),
  gpuType('g4dn.2xlarge', 8, 32, 'T4', 1),
  gpuType('g4dn.4xlarge', 16, 64, 'T4', 1),
  gpuType('g4dn.8xlarge', 32, 128, 'T4', 1),
  gpuType('g4dn.16xlarge', 64, 256, 'T4', 1),
  gpuType('g4dn.12xlarge', 48, 192, 'T4', 4),
  gpuType('g4dn.metal', 96, 384, 'T4', 8),
  gpuType('g5.xlarge', 4, 16, 'A10G', 1),
  gpuType('g5.2xlarge', 8, 32, 'A10G', 1),
  gpuType('g5.4xlarge', 16, 64, 'A10G', 1),
  gpuType('g5.8xlarge', 32, 128, 'A10G', 1),
  gpuType('g5.16xlarge', 64, 256, 'A10G', 1),
  gpuType('g5.12xlarge', 48, 192, 'A10G', 4),
  gpuType('g5.24xlarge', 96, 384, 'A10G', 4),
  gpuType('g5.48xlarge', 192, 768, 'A10G', 8),
  gpuType('g6.xlarge', 4, 16, 'L4', 1),
  gpuType('g6.2xlarge', 8, 32, 'L4', 1),
  gpuType('g6.4xlarge', 16, 64, 'L4', 1),
  gpuType('g6.8xlarge', 32, 128, 'L4', 1),
  gpuType('g6.16xlarge', 64, 256, 'L4', 1),
  gpuType('g6.12xlarge', 48, 192, 'L4', 4),
  gpuType('g6.24xlarge', 96, 384, 'L4', 4),
  gpuType('g6.48xlarge', 192, 768, 'L4', 8),
  gpuType('g6e.xlarge', 4, 32, 'L40S', 1),
  gpuType('g6e.2xlarge', 8, 64, 'L40S', 1),
  gpuType('g6e.4xlarge', 16, 128, 'L40S', 1),
  gpuType('g6e.8xlarge', 32, 256, 'L40S', 1),
  gpuType('g6e.16xlarge', 64, 512, 'L40S', 1),
  gpuType('g6e.12xlarge', 48, 384, 'L40S', 4),
  gpuType('g6e.24xlarge', 96, 768, 'L40S', 4),
  gpuType('g6e.48xlarge', 192, 1536, 'L40S', 8),
  gpuType('p3.2xlarge', 8, 61, 'V100', 1),
  gpuType('p3.8xlarge', 32, 244, 'V100', 4),
  gpuType('p3.16xlarge', 64, 488, 'V100', 8),
  gpuType('p3dn.24xlarge', 96, 768, 'V100-32GB', 8),
  gpuType('p4d.24xlarge', 96, 1152, 'A100', 8),
  gpuType('p4de.24xlarge', 96, 1152, 'A100-80GB', 8),
  gpuType('p5.4xlarge', 16, 256, 'H100', 1),
  gpuType('p5.48xlarge', 192, 2048, 'H100', 8),
  gpuType('p5e.48xlarge', 192, 2048, 'H200', 8),
  gpuType('p5en.48xlarge', 192, 2048, 'H200', 8),
];

/** Other spellings of an accelerator, upper-cased, to its canonical name. */
const ACCELERATOR_ALIASES: Readonly<Record<string, string>> = {
  A10: 'A10G',
};

/** vCPUs of each size; memory follows from the family's GiB per vCPU. */
const SIZES: readonly (readonly [string, number])[] = [
  ['large', 2],
  ['xlarge', 4],
  ['2xlarge', 8],
  ['4xlarge', 16],
  ['8xlarge', 32],
  ['12xlarge', 48],
  ['16xlarge', 64],
  ['24xlarge', 96],
  ['32xlarge', 128],
  ['48xlarge', 192],
];

/** CPU families: GiB per vCPU, and the largest size each offers (metal sizes left out). */
const CPU_FAMILIES: readonly { readonly family: string; readonly gibPerVcpu: number; readonly sizes: readonly string[] }[] = [
  { family: 'c7i', gibPerVcpu: 2, sizes: ['large', 'xlarge', '2xlarge', '4xlarge', '8xlarge', '12xlarge', '16xlarge', '24xlarge', '48xlarge'] },
  { family: 'm6i', gibPerVcpu: 4, sizes: ['large', 'xlarge', '2xlarge', '4xlarge', '8xlarge', '12xlarge', '16xlarge', '24xlarge', '32xlarge'] },
  { family: 'm7i', gibPerVcpu: 4, sizes: ['large', 'xlarge', '2xlarge', '4xlarge', '8xlarge', '12xlarge', '16xlarge', '24xlarge', '48xlarge'] },
  { family: 'r7i', gibPerVcpu: 8, sizes: ['large', 'xlarge', '2xlarge', '4xlarge', '8xlarge', '12xlarge', '16xlarge', '24xlarge', '48xlarge'] },
];

/**
 * CPU-only types, cheapest first: by vCPUs, then memory (within a size, more memory costs
 * more: c7i < m6i < m7i < r7i), then the family order above.
 */
const CPU_TYPES: readonly InstanceTypeInfo[] = CPU_FAMILIES.flatMap(({ family, gibPerVcpu, sizes }) =>
  SIZES.filter(([size]) => sizes.includes(size)).map(([size, vcpus]) => ({
    name: `${family}.${size}`,
    vcpus,
    memoryGib: vcpus * gibPerVcpu,
    gpu: null,
  })),
).sort((a, b) => a.vcpus - b.vcpus || a.memoryGib - b.memoryGib);

/** Every type in the table: GPU types, then CPU types. */
export const INSTANCE_TYPES: readonly InstanceTypeInfo[] = [...GPU_TYPES, ...CPU_TYPES];

/** The CPU-only types, cheapest first. */
export function cpuInstanceTypes(): readonly InstanceTypeInfo[] {
  return CPU_TYPES;
}

/** The GPU types with this accelerator (any spelling, any case), smallest first; null for an unknown accelerator. */
export function gpuInstanceTypes(accelerator: string): readonly InstanceTypeInfo[] | null {
  const name = canonicalAccelerator(accelerator);
  const types = GPU_TYPES.filter((type) => type.gpu?.name.toUpperCase() === name);
  return types.length === 0 ? null : types;
}

/** The accelerator names the table knows, for error messages. */
export function knownAccelerators(): readonly string[] {
  return [...new Set(GPU_TYPES.map((type) => type.gpu?.name ?? ''))];
}

/** The table's entry for an instance type; null for a type it does not list. */
export function instanceTypeInfo(instanceType: string): InstanceTypeInfo | null {
  return INSTANCE_TYPES.find((type) => type.name === instanceType) ?? null;
}

/**
 * The architecture of any instance type, from EC2's naming: Graviton families carry a `g`
 * after the generation digit (`m7g`, `c7gn`, `r6gd`, `g5g`), plus `a1`. A `g` before the
 * digit is the GPU family (`g5`), which is x86.
 */
export function architectureOf(instanceType: string): Architecture {
  const family = instanceType.split('.')[0] ?? '';
  return family === 'a1' || /^[a-z]+\d+[a-z]*g[a-z]*$/.test(family) ? 'arm64' : 'x86_64';
}

/**
 * Whether an instance type has NVIDIA GPUs (and so needs an image with drivers): a table
 * entry with a GPU, or any type of EC2's GPU families `g*` and `p*` that the table omits.
 */
export function hasGpus(instanceType: string): boolean {
  const known = instanceTypeInfo(instanceType);
  if (known !== null) return known.gpu !== null;
  return /^[gp]\d/.test(instanceType);
}

/**
 * Instance types with an Elastic Fabric Adapter (EFA), from EC2's list of supported types:
 * the larger GPU sizes, every multi-GPU training type, and the largest CPU sizes of the
 * families above. A type not listed gets EC2's default network with `network_tier: best`.
 */
const EFA_TYPES: ReadonlySet<string> = new Set([
  'g4dn.8xlarge', 'g4dn.12xlarge', 'g4dn.16xlarge', 'g4dn.metal',
  'g5.8xlarge', 'g5.12xlarge', 'g5.16xlarge', 'g5.24xlarge', 'g5.48xlarge',
  'g6.8xlarge', 'g6.12xlarge', 'g6.16xlarge', 'g6.24xlarge', 'g6.48xlarge',
  'g6e.8xlarge', 'g6e.12xlarge', 'g6e.16xlarge', 'g6e.24xlarge', 'g6e.48xlarge',
  'p3dn.24xlarge', 'p4d.24xlarge', 'p4de.24xlarge', 'p5.48xlarge', 'p5e.48xlarge', 'p5en.48xlarge',
  'c7i.48xlarge', 'm6i.32xlarge', 'm7i.48xlarge', 'r7i.48xlarge',
]);

/** Whether an instance type has EFA, which `network_tier: best` asks for. */
export function hasEfa(instanceType: string): boolean {
  return EFA_TYPES.has(instanceType);
}

/**
 * Network cards of the EFA types that have more than one, from EC2's instance type
 * specifications (`aws ec2 describe-instance-types --query
 * 'InstanceTypes[].NetworkInfo.MaximumNetworkCards'`): an EFA interface on each card is what
 * gives such a type its whole bandwidth (p5: 32 cards, 3,200 Gbps).
 */
const NETWORK_CARDS: Readonly<Record<string, number>> = {
  'p4d.24xlarge': 4,
  'p4de.24xlarge': 4,
  'p5.48xlarge': 32,
  'p5e.48xlarge': 32,
  'p5en.48xlarge': 16,
  'g6e.24xlarge': 2,
  'g6e.48xlarge': 4,
};

/** How many network cards an instance type has (1 for a type the table does not list). */
export function networkCards(instanceType: string): number {
  return NETWORK_CARDS[instanceType] ?? 1;
}

function canonicalAccelerator(name: string): string {
  const upper = name.toUpperCase();
  return ACCELERATOR_ALIASES[upper] ?? upper;
}
