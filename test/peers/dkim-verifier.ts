/**
 * An independent DKIM check for tests: mailauth (not our signer) verifies a message, looking the
 * key up over real DNS queries to a DNS server on loopback that publishes it.
 */
import { promises as dns } from 'node:dns';
import { dkimVerify } from 'mailauth';
import { dkimDnsRecordValue } from '../../src/modules/delivery/render/dkim.ts';
import { startDnsServer } from './dns-server.ts';

export interface DkimVerifier {
  /** mailauth's verdict for the first signature: 'pass', 'fail', 'neutral', ... */
  verify(raw: Buffer): Promise<string | undefined>;
  close(): Promise<void>;
}

/** Publishes `publicKeyBase64` at `<selector>._domainkey.<domain>` and verifies against it. */
export async function startDkimVerifier(
  domain: string,
  selector: string,
  publicKeyBase64: string,
): Promise<DkimVerifier> {
  const value = dkimDnsRecordValue(publicKeyBase64);
  const server = await startDnsServer({
    [`${selector}._domainkey.${domain}`]: { TXT: [value.match(/.{1,255}/g) ?? []] },
  });
  const resolver = new dns.Resolver({ timeout: 2000, tries: 1 });
  resolver.setServers([server.address]);
  return {
    async verify(raw) {
      const res = await dkimVerify(raw, {
        resolver: (async (name: string, type: string) => {
          if (type !== 'TXT') throw Object.assign(new Error(`unexpected ${type} lookup`), { code: 'ENOTFOUND' });
          return resolver.resolveTxt(name);
        }) as never,
      });
      return res.results[0]?.status.result;
    },
    close: () => server.close(),
  };
}
