// The tries of a launch that found no capacity, read back from its reason, for the short line
// `relaunch run` prints and the list the jobs page shows while a relaunch waits for capacity.

/** One try of a launch: the instance type, where (a zone, or the local runtime's try number), and EC2's answer. */
export interface CapacityTry {
  readonly instanceType: string;
  readonly where: string;
  readonly answer: string;
}

/**
 * The tries a no-capacity reason lists (`... tried g5.xlarge in us-east-1a:
 * InsufficientInstanceCapacity, ...; next try in 60 s`, as the EC2 and local compute word
 * them), in order; [] when it lists none.
 */
export function capacityTries(reason: string): CapacityTry[] {
  const tried = /tried (.*?)(?:; next try in|; launch_timeout|$)/.exec(reason)?.[1] ?? '';
  const tries: CapacityTry[] = [];
  for (const entry of tried.split(', ')) {
    const parts = /^([\w.-]+) ((?:in|try) [^:]+): (.+)$/.exec(entry);
    if (parts !== null) tries.push({ instanceType: parts[1] as string, where: parts[2] as string, answer: parts[3] as string });
  }
  return tries;
}

/** The instance types of the tries, each once, in the order first tried. */
export function triedInstanceTypes(reason: string): string[] {
  return [...new Set(capacityTries(reason).map((each) => each.instanceType))];
}
