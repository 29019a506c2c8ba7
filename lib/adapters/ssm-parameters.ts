// Public SSM parameters, read per region: where the current default AMIs are named.

import { GetParameterCommand, type SSMClient } from '@aws-sdk/client-ssm';

/** A parameter's value in a region, or null when the region has no such parameter. */
export type ParameterReader = (region: string, name: string) => Promise<string | null>;

/** Reads parameters with GetParameter, one client per region. Other errors (throttling) are thrown. */
export function ssmParameterReader(ssm: (region: string) => SSMClient): ParameterReader {
  return async (region, name) => {
    try {
      const response = await ssm(region).send(new GetParameterCommand({ Name: name }));
      return response.Parameter?.Value ?? null;
    } catch (error) {
      if ((error as { name?: unknown }).name === 'ParameterNotFound') return null;
      throw error;
    }
  };
}
