/**
 * The destination most delivery tests send to: a sink MX on loopback and a loopback DNS server
 * in which `dest.test`'s MX is that sink and the sending domain's DKIM record is published.
 * `env` points a Postyard context at both (createTestContext({ env })), so a test names only
 * what differs: a scripted sink, more zone records, more env.
 */
import { type DnsServer, startDnsServer, type ZoneInput } from '../peers/dns-server.ts';
import { type SinkMx, type SinkMxOptions, startSinkMx } from '../peers/sink-mx.ts';
import type { TestSigningKey } from './delivery.ts';

export interface Destination {
  sink: SinkMx;
  dns: DnsServer;
  /** POSTYARD_DNS_SERVERS, POSTYARD_MX_PORT and the EHLO name postyard.test. */
  env: Record<string, string>;
  /** Closes the sink, then the DNS server. */
  close(): Promise<void>;
}

export async function startDestination(opts: {
  signing: TestSigningKey;
  sink?: SinkMxOptions;
  /** Records added to the zone (or replacing one of the same name). */
  zone?: ZoneInput;
}): Promise<Destination> {
  const sink = await startSinkMx(opts.sink);
  const dns = await startDnsServer({
    'dest.test': { MX: [{ preference: 10, exchange: 'mx1.dest.test' }] },
    'mx1.dest.test': { A: ['127.0.0.1'] },
    ...opts.signing.zone,
    ...opts.zone,
  });
  return {
    sink,
    dns,
    env: {
      POSTYARD_DNS_SERVERS: dns.address,
      POSTYARD_MX_PORT: String(sink.port),
      POSTYARD_EHLO_NAME: 'postyard.test',
    },
    async close() {
      await sink.close();
      await dns.close();
    },
  };
}
