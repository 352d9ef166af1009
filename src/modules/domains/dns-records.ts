/**
 * The DNS records a sending domain publishes, and checking them against DNS.
 *
 * Design notes (docs/domains.md explains them to users)
 * - DKIM: TXT `<selector>._domainkey.<domain>` = `v=DKIM1; k=rsa; p=<key>`. Verified when a TXT
 *   record there carries exactly our public key in p= (whitespace inside p= is ignored: DNS
 *   consoles split long strings). The only record required for `verified`: it is what proves
 *   control of the zone and what makes DMARC pass (aligned DKIM), as SparkPost requires.
 * - SPF: TXT on the domain = `v=spf1 include:<bounce host> ~all`. A self-hosted MTA has no fixed
 *   vendor include, so the operator publishes the sending addresses once, in the SPF record of
 *   the bounce host (POSTYARD_BOUNCE_HOST), and every customer domain includes it; a change of
 *   sending addresses is then one DNS edit. Verified when the domain has exactly one SPF record
 *   holding that include. Recommended, not required: mail leaves with the return-path domain as
 *   envelope sender, so DMARC's SPF leg is evaluated there.
 * - Return path: CNAME `bounces.<domain>` -> the bounce host. The envelope sender becomes
 *   `bounces+<message id>@bounces.<domain>`: it inherits the bounce host's MX (asynchronous
 *   bounces come back to Postyard) and SPF (so SPF passes and aligns, relaxed, with the From
 *   domain). Not required: until it verifies, mail uses the bounce host itself as envelope domain.
 * - DMARC: TXT `_dmarc.<domain>` = `v=DMARC1; p=none;` (monitoring only; we never suggest a policy
 *   that could block the customer's other mail). Verified when a DMARC record exists at the
 *   domain or at a parent (an organizational-domain policy covers subdomains). Recommended.
 * - No bounce host configured (POSTYARD_BOUNCE_HOST unset and the EHLO name an address literal:
 *   the placeholder `localhost`): the SPF and return-path records are left out rather than shown
 *   as `include:localhost` and a CNAME to localhost, records nobody can usefully publish. The
 *   first verification after a bounce host is configured adds them (completeRecords).
 * - DNS answers: NXDOMAIN / NODATA mean "absent" (the record fails); any other error (SERVFAIL,
 *   timeout, refused) is transient and leaves the record's previous status untouched, with an
 *   explanation, so a flaky resolver never un-verifies a domain.
 */
import { promises as dnsPromises } from 'node:dns';

export type RecordPurpose = 'dkim' | 'spf' | 'return_path' | 'dmarc' | 'tracking';
export type RecordStatus = 'pending' | 'verified' | 'failed';

export interface DnsRecord {
  purpose: RecordPurpose;
  type: 'TXT' | 'CNAME';
  name: string;
  value: string;
  /** Whether the domain's status depends on this record (DKIM only). */
  required: boolean;
  status: RecordStatus;
  last_checked_at: string | null;
  /** Why the record is not verified (or why the last check did not conclude); null otherwise. */
  error: string | null;
}

export const RETURN_PATH_LABEL = 'bounces';

export function dkimRecordName(selector: string, domain: string): string {
  return `${selector}._domainkey.${domain}`;
}

/** The bounce host's value when none is configured (config.ts): fit for development only. */
export const NO_BOUNCE_HOST = 'localhost';

export function buildRecords(opts: {
  domain: string;
  selector: string;
  publicKeyBase64: string;
  bounceHost: string;
}): DnsRecord[] {
  const { domain, selector, publicKeyBase64, bounceHost } = opts;
  const base = { status: 'pending' as const, last_checked_at: null, error: null };
  const records: DnsRecord[] = [
    {
      purpose: 'dkim',
      type: 'TXT',
      name: dkimRecordName(selector, domain),
      value: `v=DKIM1; k=rsa; p=${publicKeyBase64}`,
      required: true,
      ...base,
    },
    { purpose: 'spf', type: 'TXT', name: domain, value: `v=spf1 include:${bounceHost} ~all`, required: false, ...base },
    {
      purpose: 'return_path',
      type: 'CNAME',
      name: `${RETURN_PATH_LABEL}.${domain}`,
      value: bounceHost,
      required: false,
      ...base,
    },
    { purpose: 'dmarc', type: 'TXT', name: `_dmarc.${domain}`, value: 'v=DMARC1; p=none;', required: false, ...base },
  ];
  if (bounceHost !== NO_BOUNCE_HOST) return records;
  return records.filter((r) => r.purpose !== 'spf' && r.purpose !== 'return_path');
}

/**
 * A domain's stored records plus those buildRecords left out while no bounce host was configured,
 * once one is (in buildRecords' order; stored records keep their values and statuses).
 */
export function completeRecords(
  stored: DnsRecord[],
  opts: { domain: string; selector: string; publicKeyBase64: string; bounceHost: string },
): DnsRecord[] {
  const have = new Set(stored.map((r) => r.purpose));
  const all = buildRecords(opts);
  if (all.every((r) => have.has(r.purpose))) return stored;
  return all.map((r) => stored.find((s) => s.purpose === r.purpose) ?? r);
}

type Lookup<T> = { kind: 'found'; value: T } | { kind: 'absent' } | { kind: 'error'; code: string };

/** Outcome of checking one record: a new status, or `unchanged` when DNS did not answer. */
export interface CheckResult {
  status: RecordStatus | 'unchanged';
  error: string | null;
}

const ABSENT_CODES = new Set(['ENOTFOUND', 'ENODATA', 'ENONAME']);
const normName = (n: string) => n.toLowerCase().replace(/\.$/, '');

/** Parses `k=v; k=v` tag lists (DKIM, DMARC); whitespace inside values is dropped. */
export function parseTags(record: string): Map<string, string> {
  const tags = new Map<string, string>();
  for (const part of record.split(';')) {
    const eq = part.indexOf('=');
    if (eq <= 0) continue;
    tags.set(part.slice(0, eq).trim().toLowerCase(), part.slice(eq + 1).replace(/\s+/g, ''));
  }
  return tags;
}

export interface DnsCheckerOptions {
  /** POSTYARD_DNS_SERVERS ('host:port' or bare IPs); default: the system resolver's servers. */
  servers?: string[] | null;
  /** Per-try timeout in ms; default 2000. */
  timeoutMs?: number;
  /** Tries per server; default 2. */
  tries?: number;
}

/** Looks published records up through the configured resolver (no cache: verify means now). */
export class DnsChecker {
  private readonly resolver: dnsPromises.Resolver;

  constructor(opts: DnsCheckerOptions = {}) {
    this.resolver = new dnsPromises.Resolver({ timeout: opts.timeoutMs ?? 2000, tries: opts.tries ?? 2 });
    if (opts.servers?.length) this.resolver.setServers(opts.servers);
  }

  /** Checks every record; the results are in the order of `records`. */
  async checkAll(records: readonly DnsRecord[], ctx: { publicKeyBase64: string; bounceHost: string }) {
    return Promise.all(records.map((r) => this.check(r, ctx)));
  }

  private async check(record: DnsRecord, ctx: { publicKeyBase64: string; bounceHost: string }): Promise<CheckResult> {
    switch (record.purpose) {
      case 'dkim':
        return this.checkDkim(record.name, ctx.publicKeyBase64);
      case 'spf':
        return this.checkSpf(record.name, ctx.bounceHost);
      case 'return_path':
        return this.checkCname(record.name, ctx.bounceHost);
      case 'dmarc':
        return this.checkDmarc(record.name);
      case 'tracking':
        // A tracking host name (tracking-host.ts): a CNAME to the public URL's host.
        return this.checkCname(record.name, record.value);
    }
  }

  private async txt(name: string): Promise<Lookup<string[]>> {
    const res = await this.query(() => this.resolver.resolveTxt(name));
    // A TXT record may come as several character-strings; they form one value (RFC 7208 3.3).
    return res.kind === 'found' ? { kind: 'found', value: res.value.map((chunks) => chunks.join('')) } : res;
  }

  private async query<T>(fn: () => Promise<T>): Promise<Lookup<T>> {
    try {
      return { kind: 'found', value: await fn() };
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? 'EUNKNOWN';
      return ABSENT_CODES.has(code) ? { kind: 'absent' } : { kind: 'error', code };
    }
  }

  private async checkDkim(name: string, publicKey: string): Promise<CheckResult> {
    const res = await this.txt(name);
    if (res.kind === 'error') return transient(name, res.code);
    const records = res.kind === 'found' ? res.value : [];
    const dkim = records.map(parseTags).filter((t) => t.has('p'));
    if (dkim.length === 0) return failed(`No DKIM TXT record found at ${name}`);
    const match = dkim.some(
      (t) =>
        t.get('p') === publicKey &&
        (t.get('v') ?? 'DKIM1') === 'DKIM1' &&
        (t.get('k') ?? 'rsa').toLowerCase() === 'rsa',
    );
    return match ? ok() : failed(`The DKIM record at ${name} does not hold this domain's public key`);
  }

  private async checkSpf(name: string, bounceHost: string): Promise<CheckResult> {
    const res = await this.txt(name);
    if (res.kind === 'error') return transient(name, res.code);
    const spf = (res.kind === 'found' ? res.value : []).filter((v) => /^v=spf1(\s|$)/i.test(v.trim()));
    if (spf.length === 0) return failed(`No SPF record (v=spf1) found at ${name}`);
    if (spf.length > 1) {
      return failed(
        `${name} has ${spf.length} SPF records; receivers treat more than one as an error (RFC 7208): merge them`,
      );
    }
    const wanted = `include:${bounceHost}`;
    const terms = (spf[0] ?? '').trim().toLowerCase().split(/\s+/);
    return terms.some((t) => t.replace(/^\+/, '').replace(/\.$/, '') === wanted)
      ? ok()
      : failed(`The SPF record of ${name} does not contain ${wanted}`);
  }

  private async checkCname(name: string, target: string): Promise<CheckResult> {
    const res = await this.query(() => this.resolver.resolveCname(name));
    if (res.kind === 'error') return transient(name, res.code);
    const targets = res.kind === 'found' ? res.value.map(normName) : [];
    if (targets.length === 0) return failed(`No CNAME record found at ${name}`);
    return targets.includes(target) ? ok() : failed(`${name} points at ${targets.join(', ')} instead of ${target}`);
  }

  private async checkDmarc(name: string): Promise<CheckResult> {
    // _dmarc.<domain>, then the parents' (a policy published at the organizational domain
    // covers its subdomains). Without a public-suffix list we stop at two labels.
    const domain = name.replace(/^_dmarc\./, '');
    const labels = domain.split('.');
    for (let i = 0; i <= labels.length - 2; i++) {
      const at = `_dmarc.${labels.slice(i).join('.')}`;
      const res = await this.txt(at);
      if (res.kind === 'error') return transient(at, res.code);
      if (res.kind === 'found' && res.value.some((v) => /^v=DMARC1\s*(;|$)/i.test(v.trim()))) return ok();
    }
    return failed(`No DMARC record (v=DMARC1) found at ${name}`);
  }
}

function ok(): CheckResult {
  return { status: 'verified', error: null };
}

function failed(error: string): CheckResult {
  return { status: 'failed', error };
}

function transient(name: string, code: string): CheckResult {
  return { status: 'unchanged', error: `DNS lookup of ${name} failed temporarily (${code}); try again later` };
}
