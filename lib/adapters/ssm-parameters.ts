// Public SSM parameters, read per region: where the current default AMIs are named.

import { GetParameterCommand, type SSMClient } from '@aws-sdk/client-ssm';
import { awsErrorCode } from './aws-errors.ts';
import type { ParameterReader } from './ec2-compute.ts';

/** Ec2Compute's ParameterReader, with GetParameter on `ssm(region)`. Other errors (throttling) are thrown. */
export function ssmParameterReader(ssm: (region: string) => SSMClient): ParameterReader {
  return async (region, name) => {
    try {
      const response = await ssm(region).send(new GetParameterCommand({ Name: name }));
      return response.Parameter?.Value ?? null;
    } catch (error) {
      if (awsErrorCode(error) === 'ParameterNotFound') return null;
      throw error;
    }
  };
}
