import type { Command } from 'commander';
import { type Config, ConfigError } from '../../config.ts';
import { config } from '../context.ts';
import { fail, type Finding, formatReport } from '../doctor/findings.ts';
import { checkConfig, checkDatabase, checkTlsCertificate } from '../doctor/local-checks.ts';
import { checkOutbound, checkPtr, checkSendingDomains } from '../doctor/network-checks.ts';

interface DoctorOptions {
  target?: string;
  testDomain: string;
  source: string[];
  timeout: string;
  json?: boolean;
}

async function runChecks(cfg: Config, opts: DoctorOptions): Promise<Finding[]> {
  const findings = checkConfig(cfg);
  const db = await checkDatabase(cfg);
  findings.push(...db.findings);
  if (db.database) {
    try {
      findings.push(...(await checkSendingDomains(cfg, db.database)));
    } catch (err) {
      // A database that was never migrated has no sending_domains table.
      findings.push(
        fail('dns', `cannot read the sending domains: ${(err as Error).message}`, 'run `postyard migrate`'),
      );
    } finally {
      await db.database.close();
    }
  }
  const outbound = await checkOutbound(cfg, {
    ...(opts.target ? { target: opts.target } : {}),
    testDomain: opts.testDomain,
    timeoutMs: Number(opts.timeout) * 1000,
  });
  findings.push(...outbound.findings);
  const sources = opts.source.length ? opts.source : outbound.sourceAddress ? [outbound.sourceAddress] : [];
  if (!cfg.relayUrl) findings.push(...(await checkPtr(cfg, sources)));
  findings.push(...checkTlsCertificate(cfg));
  return findings;
}

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
        findings = await runChecks(config(), opts);
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        findings = [fail('config', err.message, 'fix the variable named above (docs/operations.md lists them all)')];
      }
      process.stdout.write(opts.json ? `${JSON.stringify({ findings })}\n` : `${formatReport(findings)}\n`);
      if (findings.some((f) => f.status === 'fail')) process.exitCode = 1;
    });
}
