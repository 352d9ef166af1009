import type { Command } from 'commander';
import { ConfigError } from '../../config.ts';
import { config } from '../context.ts';
import { fail, type Finding, formatReport } from '../doctor/findings.ts';
import type { DoctorOptions } from '../doctor/run.ts';

/**
 * `postyard doctor`: what stands between this installation and delivered mail. Exit 1 when a
 * check fails (warnings alone exit 0).
 */
export function registerDoctor(program: Command) {
  program
    .command('doctor')
    .description(
      'Check configuration, database, DNS of every sending domain, outbound port 25, reverse DNS and the SMTP TLS certificate; print what to fix',
    )
    .option(
      '--target <host[:port]>',
      'SMTP server for the outbound check (default: the MX of --test-domain, port POSTYARD_MX_PORT)',
    )
    .option('--test-domain <domain>', 'domain whose MX the outbound check connects to', 'gmail.com')
    .option(
      '--source <address>',
      'source address to check the PTR of (repeatable; default: the one the outbound check left from)',
      (v: string, prev: string[]) => [...prev, v],
      [] as string[],
    )
    .option('--timeout <seconds>', 'outbound connection timeout', '10')
    .option('--json', 'print the findings as JSON')
    .action(async (opts: DoctorOptions) => {
      let findings: Finding[];
      try {
        const { runChecks } = await import('../doctor/run.ts');
        findings = await runChecks(config(), opts);
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        findings = [fail('config', err.message, 'fix the variable named above (docs/operations.md lists them all)')];
      }
      process.stdout.write(opts.json ? `${JSON.stringify({ findings })}\n` : `${formatReport(findings)}\n`);
      if (findings.some((f) => f.status === 'fail')) process.exitCode = 1;
    });
}
