/**
 * The SMTP client of bench/inbound.ts, in its own process (forked, IPC): so that the client's
 * CPU is not taken from the server it measures. Each of `connections` connections sends its
 * share of the messages with PIPELINING (RFC 2920): MAIL, RCPT and DATA in one write, and the
 * next message's MAIL, RCPT and DATA right behind the final "." of the previous one, so a
 * connection never waits for anything but the server's answers. Raw sockets rather than
 * nodemailer, whose pool sends one command at a time and waits for each reply.
 *
 * Message in: { port, connections, mails: { to, raw }[] }. Message out: { seconds, ok, errors }.
 */
import net from 'node:net';

interface Job {
  port: number;
  connections: number;
  mails: { to: string; raw: string }[];
}

/** Sends `mails` over one connection; resolves with [accepted, refused]. */
function runConnection(port: number, mails: { to: string; raw: string }[]): Promise<[number, number]> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port, noDelay: true });
    const expected: ('greeting' | 'ehlo' | 'mail' | 'rcpt' | 'data' | 'end' | 'quit')[] = ['greeting'];
    let next = 0; // next message whose envelope is to be written
    let dataFor = 0; // message whose DATA reply comes next
    let ok = 0;
    let refused = 0;
    let buffer = '';
    const envelope = (i: number) => {
      const m = mails[i];
      if (!m) return '';
      expected.push('mail', 'rcpt', 'data');
      next = i + 1;
      return `MAIL FROM:<>\r\nRCPT TO:<${m.to}>\r\nDATA\r\n`;
    };
    const body = (i: number) => {
      expected.push('end');
      const raw = (mails[i]?.raw ?? '').replace(/^\./gm, '..');
      return `${raw}${raw.endsWith('\r\n') ? '' : '\r\n'}.\r\n`;
    };
    const onReply = (code: number) => {
      const kind = expected.shift();
      switch (kind) {
        case 'greeting':
          expected.push('ehlo');
          socket.write('EHLO bench.test\r\n');
          return;
        case 'ehlo':
          if (mails.length === 0) {
            expected.push('quit');
            socket.write('QUIT\r\n');
          } else socket.write(envelope(0));
          return;
        case 'mail':
        case 'rcpt':
          if (code >= 400) refused++;
          return;
        case 'data': {
          const i = dataFor++;
          // 354: the data, and behind it the next envelope (or QUIT after the last).
          if (code !== 354) {
            refused++;
            socket.write(next < mails.length ? envelope(next) : 'QUIT\r\n');
            if (next >= mails.length) expected.push('quit');
            return;
          }
          const data = body(i); // its 'end' reply comes before the next envelope's
          socket.write(data + (next < mails.length ? envelope(next) : ''));
          return;
        }
        case 'end':
          if (code === 250) ok++;
          else refused++;
          if (ok + refused >= mails.length && next >= mails.length) {
            expected.push('quit');
            socket.write('QUIT\r\n');
          }
          return;
        case 'quit':
          socket.end();
          return;
        default:
          reject(new Error(`unexpected reply ${code}`));
      }
    };
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      buffer += chunk;
      for (;;) {
        const eol = buffer.indexOf('\r\n');
        if (eol < 0) break;
        const line = buffer.slice(0, eol);
        buffer = buffer.slice(eol + 2);
        // Multi-line replies ("250-...") end with the line whose fourth character is a space.
        if (line[3] === '-') continue;
        onReply(Number(line.slice(0, 3)));
      }
    });
    socket.on('error', reject);
    socket.on('close', () => resolve([ok, refused]));
  });
}

process.on('message', (job: Job) => {
  const shares: { to: string; raw: string }[][] = Array.from({ length: job.connections }, () => []);
  for (const [i, m] of job.mails.entries()) shares[i % job.connections]?.push(m);
  const started = performance.now();
  Promise.all(shares.map((s) => runConnection(job.port, s))).then(
    (counts) => {
      const seconds = (performance.now() - started) / 1000;
      const ok = counts.reduce((a, [o]) => a + o, 0);
      const errors = counts.reduce((a, [, r]) => a + r, 0);
      process.send?.({ seconds, ok, errors });
    },
    (err: unknown) => process.send?.({ error: String(err) }),
  );
});
process.on('disconnect', () => process.exit(0));
