// `relaunch simulate TASK.yaml EVENT...`: what the recovery policy would decide, with no compute.

import type { Command } from 'commander';
import { formatIssue } from '../../lib/errors.ts';
import { AGENT_STEPS } from '../../lib/agent/protocol.ts';
import { EVENT_FORMS, simulate, type SimulationResult } from '../../lib/simulate.ts';
import { parseTaskFile } from '../../lib/task-file/parse.ts';
import { exitWith, ExitStatus, reportError, subcommand, type Io } from '../exit.ts';
import { readTaskFile } from '../task-file.ts';

/** Options of `relaunch simulate`. */
export interface SimulateOptions {
  /** Print the result as one JSON object instead of a list. */
  readonly json?: boolean;
}

/** What each event means, and examples, below the options in `--help`. */
const HELP_AFTER = `
Events (each ends one attempt, except warn):
  exit:N, exit:N+M    run exited N (one code per node on a multi-node task)
  setup:N, setup:N+M  setup exited N
  preempt             a spot preemption
  lost                the instance stopped sending heartbeats
  preempt@N, lost@N   the same, of node N only (preempt@1+3: nodes 1 and 3):
                      a relaunch that reuses nodes keeps the others
  warn                an interruption warning: the next event's attempt ends
                      PREEMPTED unless every node exits 0 (warn exit:0+1);
                      warn@N: on node N, which a relaunch that reuses nodes
                      replaces (its standby is node N alone)
  rebalance           a rebalance recommendation: decides nothing; with
                      launch_on_warning: rebalance it starts a standby, as warn
                      does with launch_on_warning (shown with each decision)
  gone:N              node N's instance went away before its report: LOST,
                      or PREEMPTED after warn
  nocap               a launch found no capacity: FAILED_NO_RESOURCE on the
                      first launch, a wait for capacity on a relaunch
  noboot              an attempt whose instances never reached relaunch
  agent:STEP          relaunch's agent failed at STEP before setup, on node 0
                      (agent:STEP@N: on node N). Recovered, never charged to
                      max_restarts_on_errors; counted toward max_boot_failures,
                      as noboot is. STEP is one of:
                      ${AGENT_STEPS.join(', ')}

Examples:
  relaunch simulate task.yaml exit:29 preempt exit:1 exit:0
  relaunch simulate two-nodes.yaml setup:0+1 exit:0+0 --json
  relaunch simulate two-nodes.yaml warn exit:0+1 gone:1 exit:0+0
  relaunch simulate task.yaml preempt nocap nocap exit:0
  relaunch simulate task.yaml noboot noboot noboot
  relaunch simulate task.yaml agent:image-pull agent:image-pull exit:0
  relaunch simulate warm.yaml warn gone:0 rebalance exit:0
  relaunch simulate four-nodes-failover.yaml preempt@2 exit:0+0+0+0

A task whose relaunches may keep nodes (strategy FAILOVER, reuse_nodes,
bad_node_exit_codes) shows, after each relaunch, the nodes it runs on: in place,
the ones it keeps and replaces, or fresh nodes and why.`;

/**
 * Runs `relaunch simulate`: reads and parses the task file, replays the events through its
 * recovery policy, prints the decisions. 0 when the simulation ran, whatever the job's final
 * status; 2 for a bad file, a bad event or an event after the job ended.
 */
export async function runSimulate(file: string, events: readonly string[], options: SimulateOptions, io: Io): Promise<ExitStatus> {
  try {
    const { spec, warnings } = parseTaskFile(await readTaskFile(file));
    for (const warning of warnings) io.err(`warning: ${formatIssue(warning)}`);
    const result = simulate(spec, events);
    io.out(options.json === true ? JSON.stringify(result, null, 2) : renderResult(result));
    return ExitStatus.OK;
  } catch (error) {
    return reportError(io, error);
  }
}

/**
 * The `simulate` subcommand. A non-zero status leaves the action as a CommanderError with
 * code `relaunch.exitStatus` (commander discards an action's return value); usage errors
 * are CommanderErrors too, since addCommand does not pass exitOverride down.
 */
export function simulateCommand(io: Io): Command {
  return subcommand('simulate', io)
    .description('show what the recovery policy would decide for a sequence of attempt ends, with no compute')
    .argument('<task>', 'the task file (SkyPilot YAML)')
    .argument('<events...>', EVENT_FORMS)
    .option('--json', 'print one JSON object: {decisions: [...], final: {status}}')
    .addHelpText('after', HELP_AFTER)
    .action(async (file: string, events: string[], options: SimulateOptions) => {
      const status = await runSimulate(file, events, options, io);
      exitWith(status);
    });
}


/** What became of a standby a warning started (launch_on_warning), after its decision's reason. */
const STANDBY_WORDS = {
  adopted: ' [its standby is the next attempt, setup done]',
  released: ' [its standby is released, charged to nothing]',
  none: '',
} as const;

/** One line per event, columns aligned, then the final status. */
function renderResult(result: SimulationResult): string {
  const rows = result.decisions.map((decision, index) => ({ number: `${index + 1}.`, ...decision }));
  const width = (pick: (row: (typeof rows)[number]) => string) => Math.max(...rows.map((row) => pick(row).length));
  const numberWidth = width((row) => row.number);
  const eventWidth = width((row) => row.event);
  const actionWidth = width((row) => row.action);
  const statusWidth = width((row) => row.status);
  const lines = rows.map(
    (row) =>
      `${row.number.padEnd(numberWidth)} ${row.event.padEnd(eventWidth)}  → ${row.action.padEnd(actionWidth)}  ` +
      `${row.status.padEnd(statusWidth)}  (${row.reason})${STANDBY_WORDS[row.standby ?? 'none']}${row.nodes === undefined ? '' : ` [${row.nodes.reason}]`}`,
  );
  return [...lines, `final: ${result.final.status}`].join('\n');
}
