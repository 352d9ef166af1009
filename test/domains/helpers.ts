import { createPublicKey, createPrivateKey, sign, verify } from 'node:crypto';
import type { DnsServer } from '../peers/dns-server.ts';
import { call, type TestContext } from '../helpers/context.ts';

export const BOUNCE_HOST = 'mta.postyard.test';

export interface DnsRecordView {
  purpose: 'dkim' | 'spf' | 'return_path' | 'dmarc';
  type: 'TXT' | 'CNAME';
  name: string;
  value: string;
  required: boolean;
  status: 'pending' | 'verified' | 'failed';
  last_checked_at: string | null;
  error: string | null;
}

export interface DomainBody {
  id: string;
  domain: string;
  status: 'pending' | 'verified' | 'failed';
  status_reason: string | null;
  dkim_selector: string;
  return_path_domain: string;
  dns_records: DnsRecordView[];
  verified_at: string | null;
  created_at: string;
  updated_at: string;
}

/** TXT strings are at most 255 bytes on the wire; longer values are split, as DNS consoles do. */
export function chunks(value: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < value.length; i += 255) out.push(value.slice(i, i + 255));
  return out;
}

export function record(d: DomainBody, purpose: DnsRecordView['purpose']): DnsRecordView {
  const r = d.dns_records.find((x) => x.purpose === purpose);
  if (!r) throw new Error(`no ${purpose} record in ${JSON.stringify(d)}`);
  return r;
}

/** Publishes the records the API asked for (all, or only `only`) in the DNS peer. */
export function publish(dns: DnsServer, d: DomainBody, only?: DnsRecordView['purpose'][]) {
  for (const r of d.dns_records) {
    if (only && !only.includes(r.purpose)) continue;
    if (r.type === 'TXT') dns.set(r.name, 'TXT', [chunks(r.value)]);
    else dns.set(r.name, 'CNAME', [r.value]);
  }
}

export async function addDomain(ctx: TestContext, key: string, domain: string): Promise<DomainBody> {
  const res = await call(ctx.app, 'POST', '/v1/sending-domains', { key, body: { domain } });
  if (res.statusCode !== 201) throw new Error(`create ${domain}: ${res.statusCode} ${res.body}`);
  return res.json() as DomainBody;
}

export async function verifyDomain(ctx: TestContext, key: string, id: string): Promise<DomainBody> {
  const res = await call(ctx.app, 'POST', `/v1/sending-domains/${id}/verify`, { key });
  if (res.statusCode !== 200) throw new Error(`verify ${id}: ${res.statusCode} ${res.body}`);
  return res.json() as DomainBody;
}

/** True when `privateKeyPem` signs data that the public key published in `dkimValue` verifies. */
export function keysMatch(privateKeyPem: string, dkimValue: string): boolean {
  const p = /(?:^|;)\s*p=([^;]+)/.exec(dkimValue)?.[1]?.replace(/\s+/g, '') ?? '';
  const pub = createPublicKey({ key: Buffer.from(p, 'base64'), format: 'der', type: 'spki' });
  const data = Buffer.from(`probe ${Math.random()}`);
  const sig = sign('sha256', data, createPrivateKey(privateKeyPem));
  return verify('sha256', data, pub, sig);
}
