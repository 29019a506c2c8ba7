// `relaunch check [TASK.yaml]`: what in the AWS account would stop relaunch, read-only, one
// line per check with the fix for each failure; with a task, whether it would launch now
// and on which candidates.

import type { Command } from 'commander';
import type { CheckEnvironment, CheckOptions } from '../check-run.ts';
import { exitWith, type ExitStatus, subcommand, type Io } from '../exit.ts';

/**
 * Runs `relaunch check` (cli/check-run.ts, loaded now): 0 when no check fails (warnings
 * allowed), 1 when one does, 2 for a bad task file (the errors `validate` gives) or a bad
 * option, each named.
 */
export async function runCheck(file: string | undefined, options: CheckOptions, io: Io, environment?: CheckEnvironment): Promise<ExitStatus> {
  const { checkAccount } = await import('../check-run.ts');
  return checkAccount(file, options, io, environment);
}

/** The `check` subcommand. */
export function checkCommand(io: Io, environment?: CheckEnvironment): Command {
  return subcommand('check', io)
    .description('say what in the AWS account would stop relaunch (read-only); with a task file, whether it would launch now')
    .argument('[task]', 'a task file (SkyPilot YAML), or - for standard input: judge its candidates against the account')
    .option('--api <url>', 'the deployed relaunch API (default: $RELAUNCH_API_URL, else the stack\'s)')
    .option('--region <region>', 'the region (default: the API URL\'s, $AWS_REGION or the profile\'s, else cdk.json\'s subnets\')')
    .option('--stack <name>', 'the CloudFormation stack of relaunch (default: the one cdk.json\'s relaunch:namePrefix names, else Relaunch)')
    .option('--json', 'print one JSON object: {ok, checks: [{id, status, message, fix?}], verdict?}')
    .action(async (file: string | undefined, options: CheckOptions) => {
      exitWith(await runCheck(file, options, io, environment));
    });
}

