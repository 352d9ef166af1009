import type { Config } from '../../config.ts';
import { fail, type Finding } from './findings.ts';
import { checkConfig, checkDatabase, checkTlsCertificate } from './local-checks.ts';
import { checkOutbound, checkPtr, checkSendingDomains } from './network-checks.ts';

/** The doctor's checks in order; a module of its own so `postyard --help` does not load them. */
export interface DoctorOptions {
  target?: string;
  testDomain: string;
  source: string[];
  timeout: string;
  json?: boolean;
}

export async function runChecks(cfg: Config, opts: DoctorOptions): Promise<Finding[]> {
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
