/** One line of `postyard doctor`'s report: what was checked, how it went, and what to do. */
export interface Finding {
  /** Area: config, database, dns <domain>, outbound, ptr, tls. */
  check: string;
  status: 'ok' | 'warn' | 'fail';
  message: string;
  /** What the operator should do; absent when nothing is to be done. */
  fix?: string;
}

export const ok = (check: string, message: string): Finding => ({ check, status: 'ok', message });
export const warn = (check: string, message: string, fix?: string): Finding => ({
  check,
  status: 'warn',
  message,
  ...(fix ? { fix } : {}),
});
export const fail = (check: string, message: string, fix?: string): Finding => ({
  check,
  status: 'fail',
  message,
  ...(fix ? { fix } : {}),
});

const MARK = { ok: 'ok  ', warn: 'WARN', fail: 'FAIL' } as const;

/** The human report: one line per finding, its fix indented below, then a summary line. */
export function formatReport(findings: readonly Finding[]): string {
  const lines: string[] = [];
  for (const f of findings) {
    lines.push(`${MARK[f.status]}  ${f.check}: ${f.message}`);
    if (f.fix) lines.push(`      fix: ${f.fix}`);
  }
  const failures = findings.filter((f) => f.status === 'fail').length;
  const warnings = findings.filter((f) => f.status === 'warn').length;
  lines.push(
    failures === 0 && warnings === 0
      ? 'all checks passed'
      : `${failures} problem${failures === 1 ? '' : 's'} to fix, ${warnings} warning${warnings === 1 ? '' : 's'}`,
  );
  return lines.join('\n');
}
