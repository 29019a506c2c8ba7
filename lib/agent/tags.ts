// Instance tags relaunch sets and the agent reads back from instance metadata (IMDS).
//
// Node IPs are known only once every node has launched, after the user data is fixed, so
// the launcher tags each instance with the full list and the agent polls
// `meta-data/tags/instance/<key>` (the instances launch with InstanceMetadataTags enabled).
// Keys use only characters IMDS allows in tag keys (letters, digits, `+ - = . , _ : @`).

/** Tags on every instance and volume of an attempt. */
export const TagKey = {
  jobId: 'relaunch:job-id',
  attempt: 'relaunch:attempt',
  nodeRank: 'relaunch:node-rank',
  /**
   * Set on a node kept for the next attempt, to the number of the attempt that ended: its
   * agent (which polls it with the spot notice) stops the job and asks what to do next.
   */
  heldAfter: 'relaunch:held-after',
  name: 'Name',
} as const;

/** Node IPs tags are `relaunch:node-ips:0`, `:1`, ...: EC2 caps a tag value at 256 characters. */
export const NODE_IPS_TAG_PREFIX = 'relaunch:node-ips:';

/** 16 IPv4 addresses of at most 15 characters, space-separated, fit in 255 characters. */
export const NODE_IPS_PER_TAG = 16;

/** How many node-IPs tags a job of `numNodes` nodes has. */
export function nodeIpsTagCount(numNodes: number): number {
  return Math.ceil(numNodes / NODE_IPS_PER_TAG);
}

/** The tags that carry every node's IP, head (rank 0) first, space-separated. */
export function nodeIpsTags(ips: readonly string[]): { Key: string; Value: string }[] {
  const tags: { Key: string; Value: string }[] = [];
  for (let start = 0, index = 0; start < ips.length; start += NODE_IPS_PER_TAG, index += 1) {
    tags.push({ Key: `${NODE_IPS_TAG_PREFIX}${index}`, Value: ips.slice(start, start + NODE_IPS_PER_TAG).join(' ') });
  }
  return tags;
}
