import { promises as dnsPromises } from 'node:dns';
import net from 'node:net';
import type { Config } from '../../config.ts';
import type { Database } from '../../db/index.ts';
import { buildRecords, DnsChecker } from '../../modules/domains/dns-records.ts';
import { fail, type Finding, ok, warn } from './findings.ts';

function resolver(cfg: Config): dnsPromises.Resolver {
  const r = new dnsPromises.Resolver({ timeout: 3000, tries: 2 });
  if (cfg.dnsServers?.length) r.setServers(cfg.dnsServers);
  return r;
}

/**
 * Every sending domain's records, checked by the same code as the API's verify
 * (modules/domains/dns-records.ts) against the records the current bounce host calls for.
 * DKIM, SPF and DMARC missing are failures (large mailbox providers require them of bulk
 * senders); the return-path CNAME is recommended.
 */
export async function checkSendingDomains(cfg: Config, database: Database): Promise<Finding[]> {
  const rows = await database.db
    .selectFrom('sending_domains')
    .select(['domain', 'dkim_selector', 'dkim_public_key'])
    .orderBy('domain')
    .execute();
  if (rows.length === 0) {
    return [warn('dns', 'no sending domains yet', 'add one with POST /v1/sending-domains (docs/domains.md)')];
  }
  const checker = new DnsChecker({ servers: cfg.dnsServers });
  const out: Finding[] = [];
  for (const row of rows) {
    const records = buildRecords({
      domain: row.domain,
      selector: row.dkim_selector,
      publicKeyBase64: row.dkim_public_key,
      bounceHost: cfg.bounceHost,
    });
    const results = await checker.checkAll(records, {
      publicKeyBase64: row.dkim_public_key,
      bounceHost: cfg.bounceHost,
    });
    records.forEach((rec, i) => {
      const res = results[i];
      const check = `dns ${row.domain} ${rec.purpose}`;
      if (res?.status === 'verified') {
        out.push(ok(check, `${rec.type} ${rec.name} is published`));
        return;
      }
      const fix = `publish ${rec.type} ${rec.name} "${rec.purpose === 'dkim' ? `${rec.value.slice(0, 40)}…` : rec.value}" (full value: GET /v1/sending-domains/<id>)`;
      const message = res?.error ?? 'not verified';
      out.push(rec.purpose === 'return_path' ? warn(check, message, fix) : fail(check, message, fix));
    });
  }
  return out;
}

export interface OutboundTarget {
  host: string;
  port: number;
}

/** `host`, `host:port`, `[v6]:port`; the port defaults to POSTYARD_MX_PORT. */
export function parseTarget(value: string, defaultPort: number): OutboundTarget {
  const m = /^\[([^\]]+)\](?::(\d+))?$/.exec(value) ?? /^([^:]+)(?::(\d+))?$/.exec(value);
  if (!m?.[1]) return { host: value, port: defaultPort };
  return { host: m[1], port: m[2] ? Number(m[2]) : defaultPort };
}

/**
 * Outbound SMTP: connects to `target` (or the first MX of `testDomain`, found through the
 * configured resolver), reads the 220 greeting, says EHLO and QUIT. Returns the local address the
 * connection left from: the source address whose PTR record receivers check.
 */
export async function checkOutbound(
  cfg: Config,
  opts: { target?: string; testDomain: string; timeoutMs: number },
): Promise<{ findings: Finding[]; sourceAddress: string | null }> {
  if (cfg.relayUrl) {
    return {
      findings: [ok('outbound', 'mail goes through the configured relay (POSTYARD_RELAY_URL); port 25 is not used')],
      sourceAddress: null,
    };
  }
  let target: OutboundTarget;
  if (opts.target) {
    target = parseTarget(opts.target, cfg.mxPort);
  } else {
    try {
      const mx = (await resolver(cfg).resolveMx(opts.testDomain)).sort((a, b) => a.priority - b.priority)[0];
      if (!mx?.exchange) throw new Error('no MX record');
      target = { host: mx.exchange, port: cfg.mxPort };
    } catch (err) {
      return {
        findings: [
          fail(
            'outbound',
            `cannot find the MX of ${opts.testDomain}: ${(err as Error).message}`,
            'check POSTYARD_DNS_SERVERS, or pass --target <host[:port]>',
          ),
        ],
        sourceAddress: null,
      };
    }
  }
  const where = `${target.host}:${target.port}`;
  try {
    const { greeting, localAddress } = await smtpHello(target, cfg.ehloName, opts.timeoutMs);
    return {
      findings: [ok('outbound', `${where} answered "${greeting}" (from ${localAddress})`)],
      sourceAddress: localAddress,
    };
  } catch (err) {
    return {
      findings: [
        fail(
          'outbound',
          `cannot talk SMTP to ${where}: ${(err as Error).message}`,
          `allow outbound TCP port ${target.port} in the firewall (many cloud providers block port 25 until asked), or send through a relay (POSTYARD_RELAY_URL)`,
        ),
      ],
      sourceAddress: null,
    };
  }
}

function smtpHello(target: OutboundTarget, ehloName: string, timeoutMs: number) {
  return new Promise<{ greeting: string; localAddress: string }>((resolve, reject) => {
    const socket = net.connect({ host: target.host, port: target.port });
    let buffer = '';
    let greeting: string | null = null;
    let localAddress = '';
    socket.once('connect', () => {
      localAddress = socket.localAddress ?? '';
    });
    const done = (err: Error | null) => {
      socket.removeAllListeners('data');
      socket.destroy();
      if (err) reject(err);
      else resolve({ greeting: greeting ?? '', localAddress });
    };
    socket.setTimeout(timeoutMs, () => done(new Error(`no answer within ${timeoutMs} ms`)));
    socket.on('error', (err) => done(err));
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      buffer += chunk;
      // Replies end with a line "NNN text" (continuation lines are "NNN-text").
      const last = /(^|\r?\n)(\d{3}) [^\r\n]*\r?\n$/.exec(buffer);
      if (!last) return;
      const code = last[2] ?? '';
      const reply = buffer.trim().split(/\r?\n/)[0] ?? '';
      buffer = '';
      if (greeting === null) {
        if (code !== '220') return done(new Error(`greeting "${reply}"`));
        greeting = reply;
        socket.write(`EHLO ${ehloName}\r\n`);
      } else if (code === '250') {
        socket.end('QUIT\r\n');
        done(null);
      } else {
        done(new Error(`EHLO answered "${reply}"`));
      }
    });
  });
}

/**
 * Reverse DNS of each source address: a PTR record must exist, its name must resolve back to the
 * address (forward-confirmed), and it should be the EHLO name. Receivers reject or junk mail
 * from addresses that fail the first two.
 */
export async function checkPtr(cfg: Config, addresses: readonly string[]): Promise<Finding[]> {
  if (addresses.length === 0) {
    return [
      warn('ptr', 'no source address known (the outbound check did not connect)', 'pass --source <public address>'),
    ];
  }
  const r = resolver(cfg);
  const out: Finding[] = [];
  for (const ip of addresses) {
    const check = `ptr ${ip}`;
    const fix = `ask the owner of ${ip} (your hosting provider) to set its PTR record to ${cfg.ehloName}, which must resolve back to ${ip}`;
    let names: string[];
    try {
      // resolvePtr, not reverse(): reverse() answers from /etc/hosts first, which receivers never see.
      names = (await r.resolvePtr(reverseName(ip))).map((n) => n.toLowerCase().replace(/\.$/, ''));
    } catch (err) {
      out.push(fail(check, `no PTR record (${(err as NodeJS.ErrnoException).code ?? 'error'})`, fix));
      continue;
    }
    const family = net.isIPv6(ip) ? 6 : 4;
    let confirmed: string | null = null;
    for (const name of names) {
      const forward = await (family === 4 ? r.resolve4(name) : r.resolve6(name)).catch(() => [] as string[]);
      if (forward.includes(ip)) {
        confirmed = name;
        break;
      }
    }
    if (!confirmed) {
      out.push(fail(check, `PTR ${names.join(', ')} does not resolve back to ${ip}`, fix));
    } else if (confirmed !== cfg.ehloName.toLowerCase()) {
      out.push(
        warn(
          check,
          `PTR ${confirmed} differs from the EHLO name ${cfg.ehloName}`,
          `set POSTYARD_EHLO_NAME=${confirmed}, or change the PTR record`,
        ),
      );
    } else {
      out.push(ok(check, `PTR ${confirmed} resolves back to ${ip} and matches the EHLO name`));
    }
  }
  return out;
}

/** The in-addr.arpa / ip6.arpa name of an address (RFC 1035 3.5, RFC 3596 2.5). */
export function reverseName(ip: string): string {
  if (net.isIPv4(ip)) return `${ip.split('.').reverse().join('.')}.in-addr.arpa`;
  const [head = '', tail = ''] = ip.split('::');
  const groups = (s: string) => (s ? s.split(':') : []);
  const missing = 8 - groups(head).length - groups(tail).length;
  const full = [...groups(head), ...Array(ip.includes('::') ? missing : 0).fill('0'), ...groups(tail)];
  const nibbles = full.map((g) => g.padStart(4, '0')).join('');
  return `${nibbles.split('').reverse().join('.')}.ip6.arpa`;
}
