/** Self-tests of the shared peers, so a broken peer fails here and not as a mystery elsewhere. */
import { promises as dns } from 'node:dns';
import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DnsServer, startDnsServer } from './dns-server.ts';
import { startSinkMx } from './sink-mx.ts';

describe('dns-server peer', () => {
  let server: DnsServer;
  let resolver: dns.Resolver;

  beforeAll(async () => {
    server = await startDnsServer({
      'a.test': { A: ['127.0.0.1'], AAAA: { ttl: 30, records: ['::1'] }, TXT: ['hello', ['split', 'record']] },
      'alias.test': { CNAME: ['a.test'] },
    });
    resolver = new dns.Resolver({ timeout: 1000, tries: 1 });
    resolver.setServers([server.address]);
  });
  afterAll(() => server.close());

  it('answers A, AAAA (with TTL), TXT and follows a CNAME', async () => {
    expect(await resolver.resolve4('A.TEST')).toEqual(['127.0.0.1']);
    expect(await resolver.resolve6('a.test', { ttl: true })).toEqual([{ address: '::1', ttl: 30 }]);
    expect((await resolver.resolveTxt('a.test')).sort()).toEqual([['hello'], ['split', 'record']]);
    expect(await resolver.resolve4('alias.test')).toEqual(['127.0.0.1']);
  });

  it('answers NXDOMAIN, NODATA and SERVFAIL, and changes at runtime', async () => {
    await expect(resolver.resolve4('nope.test')).rejects.toMatchObject({ code: 'ENOTFOUND' });
    await expect(resolver.resolveMx('a.test')).rejects.toMatchObject({ code: 'ENODATA' });
    server.servfail('a.test');
    await expect(resolver.resolve4('a.test')).rejects.toMatchObject({ code: 'ESERVFAIL' });
    server.servfail('a.test', false);
    server.set('a.test', 'A', ['127.0.0.9']);
    expect(await resolver.resolve4('a.test')).toEqual(['127.0.0.9']);
    server.remove('a.test', 'A');
    await expect(resolver.resolve4('a.test')).rejects.toMatchObject({ code: 'ENODATA' });
  });

  it('truncates a large UDP answer and serves it over TCP', async () => {
    const big = Array.from({ length: 8 }, (_, i) => String(i).repeat(250));
    server.set('big.test', 'TXT', [big]);
    expect((await resolver.resolveTxt('big.test'))[0]?.join('')).toBe(big.join(''));
    expect(server.queries.filter((q) => q.name === 'big.test').map((q) => q.transport)).toEqual(['udp', 'tcp']);
  });
});

describe('sink-mx peer', () => {
  it('accepts mail from an ordinary client and records it', async () => {
    const sink = await startSinkMx();
    try {
      const transport = nodemailer.createTransport({
        host: '127.0.0.1',
        port: sink.port,
        secure: false,
        tls: { rejectUnauthorized: false },
      });
      await transport.sendMail({ from: 'a@example.com', to: 'b@example.net', subject: 'peer', text: 'hello sink' });
      const [message] = await sink.waitForMessages(1);
      expect(message).toMatchObject({ mailFrom: 'a@example.com', rcptTo: ['b@example.net'], tls: true });
      expect(message?.raw.toString()).toContain('hello sink');
      transport.close();
    } finally {
      await sink.close();
    }
  });
});
