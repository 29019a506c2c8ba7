// Exit codes as a person reads them: a shell reports death by signal N as exit code 128+N.

/** Linux signal numbers, their names and, where it helps, what usually sends them. */
const SIGNALS: Readonly<Record<number, { readonly name: string; readonly hint?: string }>> = {
  1: { name: 'SIGHUP', hint: 'hangup, the terminal or session went away' },
  2: { name: 'SIGINT', hint: 'interrupted' },
  3: { name: 'SIGQUIT', hint: 'quit' },
  4: { name: 'SIGILL', hint: 'illegal instruction' },
  5: { name: 'SIGTRAP' },
  6: { name: 'SIGABRT', hint: 'aborted, often a failed assertion' },
  7: { name: 'SIGBUS', hint: 'bus error' },
  8: { name: 'SIGFPE', hint: 'arithmetic error' },
  9: { name: 'SIGKILL', hint: 'often out of memory' },
  10: { name: 'SIGUSR1' },
  11: { name: 'SIGSEGV', hint: 'segmentation fault' },
  12: { name: 'SIGUSR2' },
  13: { name: 'SIGPIPE', hint: 'broken pipe' },
  14: { name: 'SIGALRM' },
  15: { name: 'SIGTERM', hint: 'asked to stop' },
  16: { name: 'SIGSTKFLT' },
  17: { name: 'SIGCHLD' },
  18: { name: 'SIGCONT' },
  19: { name: 'SIGSTOP' },
  20: { name: 'SIGTSTP' },
  21: { name: 'SIGTTIN' },
  22: { name: 'SIGTTOU' },
  23: { name: 'SIGURG' },
  24: { name: 'SIGXCPU', hint: 'CPU time limit exceeded' },
  25: { name: 'SIGXFSZ', hint: 'file size limit exceeded' },
  26: { name: 'SIGVTALRM' },
  27: { name: 'SIGPROF' },
  28: { name: 'SIGWINCH' },
  29: { name: 'SIGIO' },
  30: { name: 'SIGPWR' },
  31: { name: 'SIGSYS', hint: 'bad system call' },
};

/** Linux numbers signals 1 to 64 (31 standard, then the real-time ones). */
const MAX_SIGNAL = 64;

/**
 * The signal behind an exit code, or null when the code is not 128+N for a signal N.
 * The rule is the shell's convention; a program may also exit with such a code on its own,
 * so callers say "exit code 137 (SIGKILL ...)" rather than claiming the signal for certain.
 */
export function signalOfExitCode(code: number): { readonly number: number; readonly name: string } | null {
  const signal = code - 128;
  if (!Number.isInteger(code) || signal < 1 || signal > MAX_SIGNAL) return null;
  return { number: signal, name: SIGNALS[signal]?.name ?? `signal ${signal}` };
}

/**
 * An exit code in words: `exit code 1`, `exit code 137 (SIGKILL, often out of memory)`,
 * `exit code 158 (SIGIO)`, `exit code 170 (signal 42)` (a real-time signal). Codes above
 * 128+64 are no signal and stay plain: `exit code 200`.
 */
export function describeExitCode(code: number): string {
  const signal = signalOfExitCode(code);
  if (signal === null) return `exit code ${code}`;
  const hint = SIGNALS[signal.number]?.hint;
  const detail = hint === undefined ? signal.name : `${signal.name}, ${hint}`;
  return `exit code ${code} (${detail})`;
}
