import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { openSession } from '../../src/modules/delivery/smtp/smtp-client.ts';
import { dataPayload, envelopeCommands, parseEhlo, ReplyReader } from '../../src/modules/delivery/smtp/smtp-wire.ts';

/**
 * A scripted SMTP server that records the order in which commands arrive relative to its own
 * replies, to prove what the client pipelines (RFC 2920) and what it does not.
 */
interface Scripted {
  port: number;
  /**
   * Every command line in arrival order, with how many replies the server still owed when the
   * packet carrying it arrived (0: the client waited for every reply before sending it).
   */
  arrivals: { line: string; owed: number }[];
  bodies: string[];
  close(): Promise<void>;
}

async function scriptedServer(opts: {
  pipelining: boolean;
  /** Hold the reply to the first message's end of data until this line arrives (or 1 s passes). */
  holdDataReplyUntil?: RegExp;
  dataReply?: (n: number) => string;
}): Promise<Scripted> {
  const arrivals: Scripted['arrivals'] = [];
  const bodies: string[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    let repliesSent = 0;
    let owedTotal = 1; // the greeting
    let heldOnce = false;
    let buf = '';
    let inData = false;
    let body = '';
    let held: { reply: string; timer: NodeJS.Timeout } | null = null;
    // Replies go out in command order, as a real server's do: behind a held one, they wait.
    const waiting: string[] = [];
    const reply = (text: string) => {
      if (held) return void waiting.push(text);
      repliesSent++;
      socket.write(`${text}\r\n`);
    };
    const release = () => {
      if (!held) return;
      clearTimeout(held.timer);
      const first = held.reply;
      held = null;
      for (const text of [first, ...waiting.splice(0)]) reply(text);
    };
    reply('220 scripted.test ESMTP');
    socket.on('data', (chunk) => {
      const repliesAtArrival = repliesSent;
      buf += chunk.toString('latin1');
      for (let nl = buf.indexOf('\r\n'); nl !== -1; nl = buf.indexOf('\r\n')) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 2);
        if (inData) {
          if (line === '.') {
            inData = false;
            bodies.push(body);
            const text = opts.dataReply?.(bodies.length) ?? '250 2.0.0 queued';
            owedTotal++;
            if (opts.holdDataReplyUntil && !heldOnce) {
              heldOnce = true;
              held = { reply: text, timer: setTimeout(release, 1000) };
            } else reply(text);
          } else body += `${line.startsWith('..') ? line.slice(1) : line}\n`;
          continue;
        }
        arrivals.push({ line, owed: owedTotal - repliesAtArrival });
        owedTotal++;
        const releases = held && opts.holdDataReplyUntil?.test(line);
        const verb = line.slice(0, 4).toUpperCase();
        if (verb === 'EHLO')
          reply(
            opts.pipelining
              ? '250-scripted.test\r\n250-PIPELINING\r\n250 SIZE 1000000'
              : '250-scripted.test\r\n250 SIZE 1000000',
          );
        else if (verb === 'MAIL' || verb === 'RCPT' || verb === 'RSET') reply('250 2.1.0 ok');
        else if (verb === 'DATA') {
          inData = true;
          body = '';
          reply('354 go ahead');
        } else if (verb === 'QUIT') {
          reply('221 bye');
          socket.end();
        } else reply('502 5.5.2 unknown');
        if (releases) release();
      }
    });
    socket.on('error', () => {});
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    port: (server.address() as net.AddressInfo).port,
    arrivals,
    bodies,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()?.();
});

const message = (n: number) => ({
  envelopeFrom: `bounces+${n}@rp.example.com`,
  recipients: [`r${n}@example.net`],
  raw: Buffer.from(`Subject: m${n}\r\n\r\nbody ${n}\r\n.leading dot\r\n`),
});

async function open(port: number) {
  const s = await openSession({ host: '127.0.0.1', port, ehloName: 'out.postyard.test', tlsMode: 'none' });
  cleanups.push(() => s.close());
  expect(s.connectFailure).toBeNull();
  return s;
}

describe('SMTP pipelining (RFC 2920)', () => {
  it("sends MAIL, RCPT and DATA together, and the next message's envelope right behind the data", async () => {
    const server = await scriptedServer({ pipelining: true, holdDataReplyUntil: /^MAIL FROM:<bounces\+2@/ });
    cleanups.push(() => server.close());
    const s = await open(server.port);
    const started = Date.now();
    const [r1, r2] = await Promise.all([s.send(message(1)), s.send(message(2))]);
    expect(r1).toMatchObject({ ok: true, code: 250 });
    expect(r2).toMatchObject({ ok: true, code: 250 });
    // The server held its reply to message 1's data until message 2's MAIL arrived: had the
    // client waited for that reply first, both would have waited out the 1 s hold.
    expect(Date.now() - started).toBeLessThan(900);
    // MAIL, RCPT and DATA of each message went out together (RCPT and DATA without waiting).
    expect(server.arrivals.map((a) => [a.line.replace(/ SIZE=\d+/, ''), a.owed])).toEqual([
      ['EHLO out.postyard.test', 0],
      ['MAIL FROM:<bounces+1@rp.example.com>', 0],
      ['RCPT TO:<r1@example.net>', 1],
      ['DATA', 2],
      // Message 2's envelope arrived with message 1's data, before the reply to that data.
      ['MAIL FROM:<bounces+2@rp.example.com>', 1],
      ['RCPT TO:<r2@example.net>', 2],
      ['DATA', 3],
    ]);
    // Each message's transcript has its own envelope, including the one sent early.
    expect(r2.transcript.join('\n')).toMatch(/^C: MAIL FROM:<bounces\+2@rp\.example\.com> SIZE=\d+$/m);
    expect(r2.transcript.join('\n')).toMatch(/^C: RCPT TO:<r2@example\.net>$/m);
    expect(r1.transcript.join('\n')).not.toContain('bounces+2@');
    // Dot-stuffing survived the trip.
    expect(server.bodies).toEqual(['Subject: m1\n\nbody 1\n.leading dot\n', 'Subject: m2\n\nbody 2\n.leading dot\n']);
  });

  it('a failed data reply does not reset the next transaction already under way', async () => {
    const server = await scriptedServer({
      pipelining: true,
      dataReply: (n) => (n === 1 ? '550 5.7.1 rejected as spam' : '250 2.0.0 queued'),
    });
    cleanups.push(() => server.close());
    const s = await open(server.port);
    const [r1, r2] = await Promise.all([s.send(message(1)), s.send(message(2))]);
    expect(r1).toMatchObject({ ok: false, permanent: true, stage: 'data', code: 550 });
    expect(r2).toMatchObject({ ok: true });
    expect(server.arrivals.map((a) => a.line)).not.toContain('RSET');
  });

  it('without PIPELINING, waits for each reply before the next command', async () => {
    const server = await scriptedServer({ pipelining: false });
    cleanups.push(() => server.close());
    const s = await open(server.port);
    const results = await Promise.all([s.send(message(1)), s.send(message(2))]);
    expect(results.every((r) => r.ok)).toBe(true);
    // Every command arrived after the replies to everything before it.
    expect(server.arrivals.length).toBe(7);
    for (const a of server.arrivals) expect(a.owed, a.line).toBe(0);
  });

  it('a message waiting behind one whose connection dies is reported as not sent', async () => {
    const server = await scriptedServer({ pipelining: true, holdDataReplyUntil: /^NEVER$/ });
    cleanups.push(() => server.close());
    const s = await openSession({
      host: '127.0.0.1',
      port: server.port,
      ehloName: 'out.postyard.test',
      tlsMode: 'none',
      timeouts: { dataMs: 200 },
    });
    cleanups.push(() => s.close());
    const [r1, r2] = await Promise.all([s.send(message(1)), s.send(message(2))]);
    expect(r1).toMatchObject({ ok: false, stage: 'timeout' });
    expect(r2).toMatchObject({ ok: false, notSent: true });
  });
});

describe('dataPayload', () => {
  const join = (chunks: Buffer[]) => Buffer.concat(chunks).toString('latin1');
  it('sends a clean CRLF message as it is, adding only the final dot', () => {
    const raw = Buffer.from('Subject: x\r\n\r\nhello\r\n');
    const chunks = dataPayload(raw);
    expect(chunks[0]).toBe(raw);
    expect(join(chunks)).toBe('Subject: x\r\n\r\nhello\r\n.\r\n');
    expect(join(dataPayload(Buffer.from('no final newline')))).toBe('no final newline\r\n.\r\n');
  });
  it('doubles leading dots and turns bare LF into CRLF', () => {
    expect(join(dataPayload(Buffer.from('.first\n..second\r\nthird\n.\n')))).toBe(
      '..first\r\n...second\r\nthird\r\n..\r\n.\r\n',
    );
  });
  it('ends a line at a bare CR too: no bare CR or LF leaves, and <CR>.<CR> is dot-stuffed', () => {
    expect(join(dataPayload(Buffer.from('a\r.\rMAIL FROM:<x>\r\nb\r\r\n.\r')))).toBe(
      'a\r\n..\r\nMAIL FROM:<x>\r\nb\r\n\r\n..\r\n.\r\n',
    );
    expect(join(dataPayload(Buffer.from('x\r\n.\rQUIT\r\n')))).toBe('x\r\n..\r\nQUIT\r\n.\r\n');
  });
});

describe('ReplyReader', () => {
  it('assembles multi-line replies across packet boundaries, in order', async () => {
    const r = new ReplyReader();
    r.push(Buffer.from('250-mx.example.net\r\n250-PIPE'));
    r.push(Buffer.from('LINING\r\n250 SIZE 1000\r\n354 go'));
    r.push(Buffer.from(' ahead\n'));
    const ehlo = await r.next(100, 'EHLO');
    expect(ehlo).toEqual({
      code: 250,
      lines: ['250-mx.example.net', '250-PIPELINING', '250 SIZE 1000'],
      text: '250-mx.example.net\n250-PIPELINING\n250 SIZE 1000',
    });
    expect((await r.next(100, 'DATA')).code).toBe(354);
    expect(parseEhlo(ehlo.lines)).toMatchObject({ pipelining: true, size: 1000, starttls: false });
  });

  it('ends the session on garbage, overlong lines and endless replies instead of buffering them', async () => {
    const garbage = new ReplyReader();
    garbage.push(Buffer.from('HTTP/1.1 400 Bad Request\r\n'));
    await expect(garbage.next(100, 'the greeting')).rejects.toMatchObject({ kind: 'protocol' });
    const long = new ReplyReader();
    long.push(Buffer.from(`250 ${'x'.repeat(5000)}`));
    await expect(long.next(100, 'x')).rejects.toMatchObject({ kind: 'protocol' });
    const endless = new ReplyReader();
    endless.push(Buffer.from('250-more\r\n'.repeat(201)));
    await expect(endless.next(100, 'x')).rejects.toMatchObject({ kind: 'protocol' });
  });

  it('times out with the name of what it waited for', async () => {
    await expect(new ReplyReader().next(20, 'the reply to RCPT TO')).rejects.toMatchObject({
      kind: 'timeout',
      message: 'timeout waiting for the reply to RCPT TO',
    });
  });
});

describe('envelopeCommands', () => {
  const ext = { ...parseEhlo(['250-x', '250-SIZE 100', '250 8BITMIME']) };
  it('refuses what cannot be put on the wire, before anything is sent', () => {
    const m = (from: string, to: string, raw = Buffer.from('x')) =>
      envelopeCommands({ envelopeFrom: from, recipients: [to], raw }, ext);
    expect(m('a@b.c', 'x@y.z\r\nRSET')).toMatchObject({ ok: false });
    expect(m('a@b.c> SIZE=1', 'x@y.z')).toMatchObject({ ok: false });
    expect(m('a@b.c', 'x@y.z', Buffer.alloc(101))).toMatchObject({ ok: false, why: expect.stringContaining('SIZE') });
    expect(m('a@b.c', 'jörg@y.z')).toMatchObject({ ok: false, why: expect.stringContaining('SMTPUTF8') });
    expect(m('a@b.c', 'x@y.z', Buffer.from('caf\u00e9'))).toEqual({
      ok: true,
      commands: ['MAIL FROM:<a@b.c> SIZE=5 BODY=8BITMIME', 'RCPT TO:<x@y.z>', 'DATA'],
    });
  });
});
