/**
 * MTA-STS policy host for tests: a real HTTPS server on 127.0.0.1 presenting the test CA's leaf
 * (SAN *.sts.test, *.{a,b,c,d}.sts.test), so `mta-sts.a.sts.test` verifies when the client
 * trusts test/peers/certs/test-ca-cert.pem. Answers per Host name, from a mutable table, and logs
 * every request. Names resolve to it through the DNS peer (dns-server.ts).
 */
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { TEST_CA_LEAF_CERT, TEST_CA_LEAF_KEY } from './sink-mx.ts';

export interface PolicyAnswer {
  status?: number;
  body: string;
  contentType?: string;
  headers?: Record<string, string>;
}

export interface MtaStsServer {
  port: number;
  /** Requests received: host name (without port) and path. */
  requests: { host: string; path: string }[];
  /** Sets what `https://<host>/.well-known/mta-sts.txt` answers; null = 404. */
  set(host: string, answer: PolicyAnswer | null): void;
  close(): Promise<void>;
}

/** A policy file as RFC 8461 3.2 writes it. */
export function policyText(mode: 'enforce' | 'testing' | 'none', mx: string[], maxAge = 86_400): string {
  return ['version: STSv1', `mode: ${mode}`, ...mx.map((m) => `mx: ${m}`), `max_age: ${maxAge}`, ''].join('\r\n');
}

export async function startMtaStsServer(): Promise<MtaStsServer> {
  const answers = new Map<string, PolicyAnswer>();
  const requests: { host: string; path: string }[] = [];
  const server: Server = createServer({ key: TEST_CA_LEAF_KEY, cert: TEST_CA_LEAF_CERT }, (req, res) => {
    const host = (req.headers.host ?? '').replace(/:\d+$/, '').toLowerCase();
    requests.push({ host, path: req.url ?? '' });
    const a = req.url === '/.well-known/mta-sts.txt' ? answers.get(host) : undefined;
    if (!a) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
      return;
    }
    res.writeHead(a.status ?? 200, { 'content-type': a.contentType ?? 'text/plain', ...(a.headers ?? {}) });
    res.end(a.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    port: (server.address() as AddressInfo).port,
    requests,
    set(host, answer) {
      if (answer) answers.set(host.toLowerCase(), answer);
      else answers.delete(host.toLowerCase());
    },
    close() {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
