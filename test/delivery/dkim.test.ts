import { promises as dns } from 'node:dns';
import { dkimVerify } from 'mailauth';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DnsServer, startDnsServer } from '../peers/dns-server.ts';
import {
  dkimDnsRecordValue,
  dkimSign,
  generateDkimKeyPair,
  relaxedBody,
} from '../../src/modules/delivery/render/dkim.ts';
import { buildMessage } from '../../src/modules/delivery/render/mime.ts';

const keys = generateDkimKeyPair();
let dnsServer: DnsServer;
let resolver: dns.Resolver;

/** mailauth's DNS hook, answered by the loopback DNS peer (a real query over UDP/TCP). */
async function resolve(name: string, type: string): Promise<string[][]> {
  if (type !== 'TXT') throw Object.assign(new Error(`unexpected ${type} lookup`), { code: 'ENOTFOUND' });
  return resolver.resolveTxt(name);
}

/** DNS TXT character-strings hold at most 255 bytes; longer values are split, as DNS admins do. */
const txtChunks = (value: string) => value.match(/.{1,255}/g) ?? [];

beforeAll(async () => {
  dnsServer = await startDnsServer({
    's1._domainkey.mail.example.com': { TXT: [txtChunks(dkimDnsRecordValue(keys.publicKeyBase64))] },
  });
  resolver = new dns.Resolver({ timeout: 2000, tries: 1 });
  resolver.setServers([dnsServer.address]);
});

afterAll(() => dnsServer.close());

async function message(extra: Partial<Parameters<typeof buildMessage>[0]> = {}): Promise<Buffer> {
  return buildMessage({
    from: 'Shöp <shop@mail.example.com>',
    to: { email: 'ann@example.net', name: 'Ann' },
    replyTo: 'help@mail.example.com',
    subject: 'Grüße – order 42',
    text: 'Thanks   for your order.  \r\nTrailing spaces and  runs of  blanks.\r\n\r\n\r\n',
    html: '<p>Thanks for your <b>order</b></p>',
    attachments: [{ filename: 'a.bin', contentType: 'application/octet-stream', content: Buffer.from([0, 1, 2, 255]) }],
    messageId: 'm-1@mail.example.com',
    listUnsubscribe: '<https://t.example.com/u/1>',
    listUnsubscribeOneClick: true,
    ...extra,
  });
}

const sign = (raw: Buffer) =>
  dkimSign(raw, { domainName: 'mail.example.com', keySelector: 's1', privateKey: keys.privateKeyPem });

describe('dkimSign', () => {
  it('produces a signature that mailauth verifies with the key from DNS', async () => {
    const signed = sign(await message());
    const result = await dkimVerify(signed, { resolver: resolve as never });
    expect(result.results).toHaveLength(1);
    const r = result.results[0];
    expect(r?.status.result, r?.info).toBe('pass');
    expect(r?.signingDomain).toBe('mail.example.com');
    expect(dnsServer.queries.some((q) => q.name === 's1._domainkey.mail.example.com' && q.type === 'TXT')).toBe(true);
  });

  it('signs the listed headers, over-signs From, and uses relaxed/relaxed rsa-sha256', async () => {
    const signed = sign(await message()).toString('latin1');
    const header = (signed.split(/\r\n(?![ \t])/)[0] ?? '').replace(/\r\n[ \t]/g, ' ');
    expect(header).toMatch(
      /^DKIM-Signature: v=1; a=rsa-sha256; c=relaxed\/relaxed; d=mail\.example\.com; s=s1; t=\d+;/,
    );
    const h = /h=([^;]+);/.exec(header)?.[1]?.replace(/\s/g, '').split(':');
    expect(h).toEqual([
      'from',
      'from',
      'to',
      'subject',
      'date',
      'message-id',
      'reply-to',
      'mime-version',
      'content-type',
      'list-unsubscribe',
      'list-unsubscribe-post',
    ]);
    for (const line of signed.split('\r\n').slice(0, 12)) expect(line.length).toBeLessThan(100);
  });

  it('fails verification when the body or a signed header is altered', async () => {
    const signed = sign(await message()).toString('latin1');
    const bodyTampered = signed.replace('Thanks', 'Thanx');
    const subjectTampered = signed.replace(/^Subject: .*$/m, 'Subject: free money');
    const addedFrom = signed.replace(/\r\n\r\n/, '\r\nFrom: ceo@mail.example.com\r\n\r\n');
    for (const bad of [bodyTampered, subjectTampered, addedFrom]) {
      const result = await dkimVerify(Buffer.from(bad, 'latin1'), { resolver: resolve as never });
      expect(result.results[0]?.status.result).not.toBe('pass');
    }
  });

  it('survives the whitespace changes relaxed canonicalization allows', async () => {
    const signed = sign(await message({ attachments: [], html: undefined })).toString('latin1');
    const [head, ...rest] = signed.split('\r\n\r\n');
    const body = rest.join('\r\n\r\n');
    const rewrapped = `${head?.replace(/^Subject:\s*/m, 'Subject:    ')}\r\n\r\n${body.replace(/ /g, '  ')}\r\n\r\n`;
    const result = await dkimVerify(Buffer.from(rewrapped, 'latin1'), { resolver: resolve as never });
    expect(result.results[0]?.status.result).toBe('pass');
  });

  it('signs a message with an empty body', async () => {
    const result = await dkimVerify(sign(Buffer.from('From: a@mail.example.com\r\nSubject: x\r\n\r\n')), {
      resolver: resolve as never,
    });
    expect(result.results[0]?.status.result).toBe('pass');
  });
});

describe('relaxedBody', () => {
  it('follows RFC 6376 3.4.4', () => {
    expect(relaxedBody('')).toBe('');
    expect(relaxedBody('\r\n\r\n')).toBe('');
    expect(relaxedBody(' C \r\nD \t E\r\n\r\n\r\n')).toBe(' C\r\nD E\r\n');
    expect(relaxedBody('no newline at end  ')).toBe('no newline at end\r\n');
    expect(relaxedBody('bare\nlf\n')).toBe('bare\r\nlf\r\n');
  });
});

describe('keys', () => {
  it('generates RSA-2048 keys and the DNS record value', () => {
    const k = generateDkimKeyPair();
    expect(k.privateKeyPem).toMatch(/^-----BEGIN PRIVATE KEY-----/);
    expect(Buffer.from(k.publicKeyBase64, 'base64').length).toBeGreaterThan(290); // 2048-bit SPKI DER is 294 bytes
    expect(dkimDnsRecordValue('QUJD')).toBe('v=DKIM1; k=rsa; p=QUJD');
  });
});
