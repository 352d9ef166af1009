/**
 * Raw DATA sink: a minimal SMTP receiver on 127.0.0.1 that records the exact bytes a client sent
 * between `354` and the terminating `<CRLF>.<CRLF>`, dot-stuffing included.
 *
 * Why not sink-mx.ts: smtp-server hands its application the data already un-stuffed and split
 * on its own idea of line ends, so a bare CR or bare LF that left the client cannot be told
 * apart there. SMTP smuggling tests need the wire as it was. Every command line is recorded too,
 * so a test can see that nothing after a message's data was read as a command.
 *
 * It speaks just enough SMTP for Postyard's client: EHLO (PIPELINING, 8BITMIME), MAIL, RCPT,
 * DATA, RSET, NOOP, QUIT; everything else gets 502. No TLS: the MX delivery path falls back to
 * plain text when STARTTLS is not offered.
 */
import net, { type AddressInfo } from 'node:net';

export interface RawDataMessage {
  /** Bytes after the 354 up to and including the CRLF before the final dot, as received. */
  wire: Buffer;
  /** `wire` with the dot-stuffing removed: the message as the client meant it. */
  message: Buffer;
  mailFrom: string;
  rcptTo: string[];
}

export interface RawDataSink {
  port: number;
  messages: RawDataMessage[];
  /** Every command line received, in order, across connections (without CRLF). */
  commands: string[];
  waitForMessages(count: number, timeoutMs?: number): Promise<RawDataMessage[]>;
  close(): Promise<void>;
}

const END = Buffer.from('\r\n.\r\n');

/** Removes the leading dot of every line that starts with one (RFC 5321 4.5.2), CRLF lines only. */
export function unstuff(wire: Buffer): Buffer {
  const text = wire.toString('latin1');
  return Buffer.from(text.replace(/(^|\r\n)\./g, '$1'), 'latin1');
}

function session(socket: net.Socket, sink: RawDataSink): void {
  let buf = Buffer.alloc(0);
  let inData = false;
  let mailFrom = '';
  let rcptTo: string[] = [];
  const send = (line: string) => socket.write(`${line}\r\n`);

  const command = (line: string) => {
    sink.commands.push(line);
    const verb = line.slice(0, 4).toUpperCase();
    if (verb === 'EHLO' || verb === 'HELO') send('250-raw.test\r\n250-PIPELINING\r\n250 8BITMIME');
    else if (verb === 'MAIL') {
      mailFrom = /<([^>]*)>/.exec(line)?.[1] ?? '';
      rcptTo = [];
      send('250 2.1.0 Ok');
    } else if (verb === 'RCPT') {
      rcptTo.push(/<([^>]*)>/.exec(line)?.[1] ?? '');
      send('250 2.1.5 Ok');
    } else if (verb === 'DATA') {
      inData = true;
      send('354 End data with <CR><LF>.<CR><LF>');
    } else if (verb === 'RSET' || verb === 'NOOP') send('250 2.0.0 Ok');
    else if (verb === 'QUIT') {
      send('221 2.0.0 Bye');
      socket.end();
    } else send('502 5.5.2 Command not implemented');
  };

  socket.on('data', (chunk: Buffer) => {
    buf = Buffer.concat([buf, chunk]);
    for (;;) {
      if (inData) {
        // The data may be empty: then the terminator is ".\r\n" right after the 354.
        const emptyEnd = buf.length >= 3 && buf.subarray(0, 3).toString('latin1') === '.\r\n';
        const at = emptyEnd ? -2 : buf.indexOf(END);
        if (at === -1) return;
        const wire = Buffer.from(buf.subarray(0, at + 2));
        buf = buf.subarray(at + 5);
        inData = false;
        sink.messages.push({ wire, message: unstuff(wire), mailFrom, rcptTo });
        send('250 2.0.0 Ok: queued');
        continue;
      }
      const nl = buf.indexOf('\r\n');
      if (nl === -1) return;
      const line = buf.subarray(0, nl).toString('latin1');
      buf = buf.subarray(nl + 2);
      command(line);
    }
  });
  socket.on('error', () => {});
  send('220 raw.test ESMTP');
}

export async function startRawDataSink(): Promise<RawDataSink> {
  const sockets = new Set<net.Socket>();
  const sink: RawDataSink = {
    port: 0,
    messages: [],
    commands: [],
    async waitForMessages(count, timeoutMs = 15_000) {
      const deadline = Date.now() + timeoutMs;
      while (sink.messages.length < count) {
        if (Date.now() > deadline) throw new Error(`raw sink: ${sink.messages.length}/${count} messages`);
        await new Promise((r) => setTimeout(r, 20));
      }
      return sink.messages;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    session(socket, sink);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  sink.port = (server.address() as AddressInfo).port;
  return sink;
}
