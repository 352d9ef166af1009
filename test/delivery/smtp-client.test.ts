import net from 'node:net';
import { SMTPServer } from 'smtp-server';
import { afterEach, describe, expect, it } from 'vitest';
import { SINK_TLS_CERT, SINK_TLS_KEY, type SinkMx, type SinkMxOptions, startSinkMx } from '../peers/sink-mx.ts';
import { buildMessage } from '../../src/modules/delivery/render/mime.ts';
import { relayFromUrl } from '../../src/config/relay-url.ts';
import {
  type AttemptResult,
  openSession,
  type SessionOptions,
  type SmtpSession,
} from '../../src/modules/delivery/smtp/smtp-client.ts';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()?.();
});

async function sink(options: SinkMxOptions = {}): Promise<SinkMx> {
  const s = await startSinkMx(options);
  cleanups.push(() => s.close());
  return s;
}

async function session(port: number, extra: Partial<SessionOptions> = {}): Promise<SmtpSession> {
  const s = await openSession({ host: 'mx.test', address: '127.0.0.1', port, ehloName: 'out.postyard.test', ...extra });
  cleanups.push(() => s.close());
  return s;
}

const BODY_MARKER = 'SECRET-BODY-CONTENT';
const raw = (n = 1) =>
  buildMessage({
    from: 'shop@mail.example.com',
    to: { email: `r${n}@example.net` },
    subject: `m${n}`,
    text: `${BODY_MARKER} ${n}`,
    messageId: `m${n}@mail.example.com`,
  });
const msg = async (rcpt = 'ann@example.net', n = 1) => ({
  envelopeFrom: 'bounces+m1@rp.example.com',
  recipients: [rcpt],
  raw: await raw(n),
});

function failure(r: AttemptResult) {
  if (r.ok) throw new Error(`expected a failure, got ${r.response}`);
  return r;
}

describe('SMTP session against the sink MX', () => {
  it('delivers with STARTTLS and records a transcript without the body', async () => {
    const mx = await sink({ size: 10_000_000 });
    const s = await session(mx.port);
    expect(s.connectFailure).toBeNull();
    expect(s.tls).toBe(true);
    const r = await s.send(await msg());
    expect(r).toMatchObject({ ok: true, code: 250, tls: true });
    expect(mx.messages[0]).toMatchObject({
      mailFrom: 'bounces+m1@rp.example.com',
      rcptTo: ['ann@example.net'],
      tls: true,
      heloName: 'out.postyard.test',
    });
    expect(mx.messages[0]?.raw.toString()).toContain(BODY_MARKER);
    const t = r.transcript.join('\n');
    expect(t).toMatch(/^\*: connecting to mx\.test \[127\.0\.0\.1\]:\d+/);
    expect(t).toMatch(/^S: 220 /m);
    expect(t).toMatch(/^C: EHLO out\.postyard\.test$/m);
    expect(t).toMatch(/^C: STARTTLS$/m);
    expect(t).toMatch(/^\*: connected, TLS TLSv1\.[23]$/m);
    expect(t).toMatch(/^C: MAIL FROM:<bounces\+m1@rp\.example\.com> SIZE=\d+$/m);
    expect(t).toMatch(/^C: RCPT TO:<ann@example\.net>$/m);
    expect(t).toMatch(/^S: 354 /m);
    expect(t).toMatch(/^C: <\d+ bytes of message data>$/m);
    expect(t).toMatch(/^S: 250 /m);
    expect(t).not.toContain(BODY_MARKER);
  });

  it('sends several messages over one connection, each with its own transcript', async () => {
    const mx = await sink();
    const s = await session(mx.port);
    const results = [];
    for (let i = 1; i <= 3; i++) results.push(await s.send(await msg(`r${i}@example.net`, i)));
    expect(results.every((r) => r.ok)).toBe(true);
    expect(mx.connectionCount()).toBe(1);
    expect(new Set(mx.messages.map((m) => m.remotePort)).size).toBe(1);
    expect(results[1]?.transcript[0]).toMatch(/^\*: reusing connection to mx\.test .*message 2, TLS/);
    expect(results[1]?.transcript.join('\n')).not.toMatch(/EHLO/);
    expect(results[2]?.transcript.join('\n')).toContain('RCPT TO:<r3@example.net>');
    expect(results[2]?.transcript.join('\n')).not.toContain('r2@example.net');
  });

  it('reports 451 as transient and 550 5.1.1 / 5.7.1 as permanent, and the session goes on', async () => {
    const mx = await sink({
      script: ({ stage, rcpt }) => {
        if (stage === 'rcpt' && rcpt.startsWith('busy')) return { code: 451, message: '4.3.0 Try again later' };
        if (stage === 'rcpt' && rcpt.startsWith('nobody')) return { code: 550, message: '5.1.1 No such user' };
        if (stage === 'data' && rcpt.startsWith('spam'))
          return { code: 550, message: '5.7.1 Message rejected as spam' };
        return 'accept';
      },
    });
    const s = await session(mx.port);
    const busy = failure(await s.send(await msg('busy@example.net')));
    expect(busy).toMatchObject({ permanent: false, stage: 'rcpt', code: 451, enhancedCode: '4.3.0', tls: true });
    expect(busy.response).toContain('Try again later');
    expect(busy.transcript.join('\n')).toMatch(/^C: RSET$/m);

    const nobody = failure(await s.send(await msg('nobody@example.net')));
    expect(nobody).toMatchObject({ permanent: true, stage: 'rcpt', code: 550, enhancedCode: '5.1.1' });

    const spam = failure(await s.send(await msg('spam@example.net')));
    expect(spam).toMatchObject({ permanent: true, stage: 'data', code: 550, enhancedCode: '5.7.1' });

    expect(await s.send(await msg('ok@example.net'))).toMatchObject({ ok: true });
    expect(mx.messages.map((m) => m.rcptTo[0])).toEqual(['ok@example.net']);
    expect(mx.connectionCount()).toBe(1);
  });

  it('refuses a message over the advertised SIZE before sending it', async () => {
    const mx = await sink({ size: 100 });
    const s = await session(mx.port);
    expect(failure(await s.send(await msg()))).toMatchObject({ permanent: true, stage: 'mail' });
    expect(mx.messages).toHaveLength(0);
  });

  it('reports recipients refused among several accepted ones', async () => {
    const mx = await sink({
      script: ({ stage, rcpt }) =>
        stage === 'rcpt' && rcpt === 'b@example.net' ? { code: 550, message: '5.1.1 No such user' } : 'accept',
    });
    const s = await session(mx.port);
    const r = await s.send({
      envelopeFrom: 'x@rp.example.com',
      recipients: ['a@example.net', 'b@example.net'],
      raw: await raw(),
    });
    expect(r).toMatchObject({
      ok: true,
      rejectedRecipients: [{ recipient: 'b@example.net', code: 550, enhancedCode: '5.1.1' }],
    });
  });

  it('treats a dropped connection as transient and closes the session', async () => {
    const mx = await sink({
      script: ({ stage, rcpt }) => (stage === 'rcpt' && rcpt.startsWith('drop') ? 'drop' : 'accept'),
    });
    const s = await session(mx.port);
    const r = failure(await s.send(await msg('drop@example.net')));
    expect(r).toMatchObject({ permanent: false, stage: 'rcpt' });
    expect(s.alive).toBe(false);
    expect(failure(await s.send(await msg()))).toMatchObject({
      permanent: false,
      stage: 'connect',
      response: 'connection is closed',
    });
  });

  it('times out waiting for a command reply and for the end of data', async () => {
    const mx = await sink({ script: ({ stage, rcpt }) => (rcpt.startsWith(`hang-${stage}`) ? 'hang' : 'accept') });
    const timeouts = { commandMs: 300, dataMs: 400 };
    const s1 = await session(mx.port, { timeouts });
    const started = Date.now();
    const r1 = failure(await s1.send(await msg('hang-rcpt@example.net')));
    expect(r1).toMatchObject({ permanent: false, stage: 'timeout' });
    expect(r1.response).toMatch(/RCPT TO/);
    expect(Date.now() - started).toBeLessThan(2000);
    expect(s1.alive).toBe(false);

    const s2 = await session(mx.port, { timeouts });
    const r2 = failure(await s2.send(await msg('hang-data@example.net')));
    expect(r2).toMatchObject({ permanent: false, stage: 'timeout' });
    expect(r2.transcript.join('\n')).toMatch(/timeout after 400 ms waiting for the reply to the end of data/);
  });

  it('falls back to plain text when the TLS handshake fails, and says so', async () => {
    const mx = await sink({ tls: 'broken' });
    const s = await session(mx.port);
    expect(s.connectFailure).toBeNull();
    expect(s).toMatchObject({ tls: false, tlsFallback: true });
    const r = await s.send(await msg());
    expect(r).toMatchObject({ ok: true, tls: false });
    expect(r.transcript.join('\n')).toMatch(/STARTTLS failed .*reconnecting without TLS/);
    expect(mx.messages[0]?.tls).toBe(false);
  });

  it("does not try STARTTLS with tlsMode 'none' or when the server does not offer it", async () => {
    for (const [tls, tlsMode] of [
      [true, 'none'],
      [false, 'opportunistic'],
    ] as const) {
      const mx = await sink({ tls });
      const s = await session(mx.port, { tlsMode });
      const r = await s.send(await msg());
      expect(r).toMatchObject({ ok: true, tls: false });
      expect(r.transcript.join('\n')).not.toMatch(/^C: STARTTLS/m);
    }
  });
});

describe('SMTP session connection failures', () => {
  async function rawServer(onConnect: (socket: net.Socket) => void): Promise<number> {
    const server = net.createServer(onConnect);
    const sockets = new Set<net.Socket>();
    server.on('connection', (c) => sockets.add(c));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    cleanups.push(async () => {
      for (const c of sockets) c.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    });
    return (server.address() as net.AddressInfo).port;
  }

  it('reports a refused connection as a transient connect failure on every send', async () => {
    // A port that was just free: nothing listens there any more, so the connect is refused.
    const probe = net.createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', () => r()));
    const port = (probe.address() as net.AddressInfo).port;
    await new Promise<void>((r) => probe.close(() => r()));

    const s = await session(port);
    expect(s.connectFailure).toMatchObject({ ok: false, permanent: false, stage: 'connect' });
    expect(s.connectFailure?.response).toMatch(/ECONNREFUSED/);
    expect(failure(await s.send(await msg()))).toMatchObject({ stage: 'connect', permanent: false });
    expect(s.alive).toBe(false);
  });

  it('times out when the greeting never comes', async () => {
    const port = await rawServer(() => {});
    const s = await session(port, { timeouts: { greetingMs: 300 } });
    expect(s.connectFailure).toMatchObject({ permanent: false, stage: 'timeout' });
  });

  it('treats a 5xx greeting as transient (another MX or a later try may work)', async () => {
    const port = await rawServer((c) => c.end('554 5.7.1 No SMTP service for you\r\n'));
    const s = await session(port);
    expect(s.connectFailure).toMatchObject({ permanent: false, stage: 'connect', code: 554, enhancedCode: '5.7.1' });
  });
});

describe('relay mode', () => {
  it('authenticates and masks the credentials in the transcript', async () => {
    const server = new SMTPServer({
      authMethods: ['PLAIN', 'LOGIN'],
      allowInsecureAuth: false,
      key: SINK_TLS_KEY,
      cert: SINK_TLS_CERT,
      logger: false,
      disableReverseLookup: true, // no PTR query may leave the machine
      onAuth: (auth, _s, cb) =>
        auth.username === 'relay-user' && auth.password === 'p@ss w0rd'
          ? cb(null, { user: 'relay-user' })
          : cb(new Error('bad')),
      onData: (stream, _s, cb) => {
        stream.resume();
        stream.on('end', () => cb(null));
      },
    });
    server.on('error', () => {});
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    cleanups.push(() => new Promise((r) => server.close(() => r())));
    const port = (server.server.address() as net.AddressInfo).port;

    // An IP literal: with a host name nodemailer would ask the system resolver, off this machine.
    const relay = relayFromUrl(`smtp://relay-user:p%40ss%20w0rd@127.0.0.1:${port}`);
    const s = await session(relay.port, {
      host: relay.host,
      address: undefined,
      secure: relay.secure,
      auth: relay.auth,
    });
    expect(s.connectFailure).toBeNull();
    const r = await s.send(await msg());
    expect(r).toMatchObject({ ok: true, tls: true });
    const t = r.transcript.join('\n');
    expect(t).toMatch(/^C: AUTH PLAIN \*\*\*\*$/m);
    expect(t).toMatch(/^S: 235 /m);
    expect(t).not.toContain('p@ss');
    expect(t).not.toContain(Buffer.from('\u0000relay-user\u0000p@ss w0rd').toString('base64'));

    const bad = await session(relay.port, { host: relay.host, auth: { user: 'relay-user', pass: 'wrong' } });
    expect(bad.connectFailure).toMatchObject({ permanent: false, stage: 'auth', code: 535 });
  });

  it('parses relay URLs', () => {
    expect(relayFromUrl('smtp://u:p@relay.example.com:2525')).toEqual({
      host: 'relay.example.com',
      port: 2525,
      secure: false,
      tls: 'required',
      verify: true,
      auth: { user: 'u', pass: 'p' },
    });
    expect(relayFromUrl('smtps://relay.example.com')).toEqual({
      host: 'relay.example.com',
      port: 465,
      secure: true,
      tls: 'required',
      verify: true,
    });
    expect(relayFromUrl('smtp://[::1]?tls=none')).toEqual({
      host: '::1',
      port: 587,
      secure: false,
      tls: 'none',
      verify: true,
    });
    expect(relayFromUrl('smtp://u:p@relay.example.com?verify=false')).toMatchObject({ tls: 'required', verify: false });
    expect(() => relayFromUrl('smtp://u:p@relay.example.com?tls=none')).toThrow(/clear text/);
    expect(() => relayFromUrl('http://relay.example.com')).toThrow(/smtp:\/\/ or smtps:\/\//);
    expect(() => relayFromUrl('not a url')).toThrow(/not a valid URL/);
  });
});
