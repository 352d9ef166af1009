/**
 * Sink MX: a real SMTP server on 127.0.0.1 that stands in for a remote mail exchanger in tests.
 *
 * Design notes
 * - Built on smtp-server, the same library production code meets in the wild, so tests exercise
 *   real SMTP framing, PIPELINING, STARTTLS and SIZE rather than a mock.
 * - The TLS key pair is a test-only, self-signed PEM shipped in ./certs (100-year validity), so
 *   nothing is generated per run and the sink never falls back to smtp-server's built-in
 *   certificate (which has expired and prints a warning).
 * - Replies are scripted per recipient and per message: `script` sees the recipient, the envelope
 *   sender and the message index (0-based, counted across the whole sink) and returns what to do.
 *   It is consulted at RCPT (stage 'rcpt') and again at end of DATA (stage 'data') so a test can
 *   refuse at either point. Messages in a reply should carry their own enhanced status code
 *   ("5.1.1 No such user"): the sink hides smtp-server's automatic enhanced codes so that a test
 *   can also imitate servers that send none.
 * - 'drop' destroys the TCP connection mid-transaction; 'hang' never answers (timeout tests).
 * - `tls: 'broken'` still advertises STARTTLS but only speaks TLS 1.0, which Node clients refuse,
 *   so the handshake fails: that is how the plain-text fallback gets tested.
 */
import { readFileSync } from 'node:fs';
import type { AddressInfo, Socket } from 'node:net';
import { SMTPServer, type SMTPServerOptions, type SMTPServerSession } from 'smtp-server';

const certDir = new URL('./certs/', import.meta.url);
/** Test-only key pair (CN=localhost, SAN localhost, mx.test, 127.0.0.1). Never use in production. */
export const SINK_TLS_KEY = readFileSync(new URL('sink-key.pem', certDir), 'utf8');
export const SINK_TLS_CERT = readFileSync(new URL('sink-cert.pem', certDir), 'utf8');
/**
 * A test CA (test-ca-cert.pem) and a leaf it signed for *.sts.test, *.{a,b,c,d}.sts.test,
 * localhost and 127.0.0.1 (generate-test-ca.sh): for tests where the certificate must verify
 * (MTA-STS enforce, relays). Test-only keys; never use them anywhere else.
 */
export const TEST_CA_CERT = readFileSync(new URL('test-ca-cert.pem', certDir), 'utf8');
export const TEST_CA_LEAF_CERT = readFileSync(new URL('ca-leaf-cert.pem', certDir), 'utf8');
export const TEST_CA_LEAF_KEY = readFileSync(new URL('ca-leaf-key.pem', certDir), 'utf8');

export type SinkReply = 'accept' | 'drop' | 'hang' | { code: number; message: string };

export interface SinkScriptContext {
  /** 'rcpt' when answering RCPT TO, 'data' when answering the end of DATA. */
  stage: 'rcpt' | 'data';
  rcpt: string;
  mailFrom: string;
  /** 0-based index of the transaction across the whole sink (first MAIL FROM = 0). */
  messageIndex: number;
  /** The client's (source) address: which address a refused attempt came from. */
  remoteAddress: string;
}

export interface SinkMessage {
  mailFrom: string;
  rcptTo: string[];
  raw: Buffer;
  tls: boolean;
  /** The EHLO/HELO name the client announced. */
  heloName: string;
  /** Remote port of the client connection: equal values mean the same SMTP session. */
  remotePort: number;
  /** The client's (source) address, e.g. 127.0.0.2 when the sender bound that address. */
  remoteAddress: string;
  /** Date.now() when the end of DATA was accepted: rate limits are measured on these. */
  receivedAt: number;
}

export interface SinkMxOptions {
  /** Port to listen on; default 0 (random free port). */
  port?: number;
  /** Scripted replies; default: accept everything. A promise holds the reply until it settles. */
  script?: (ctx: SinkScriptContext) => SinkReply | Promise<SinkReply>;
  /** Offer STARTTLS (true, default), don't (false), or offer a handshake that always fails. */
  tls?: boolean | 'broken';
  /** Advertised SIZE limit in bytes; default 0 (not advertised). */
  size?: number;
  /** Greeting banner text; default 'sink.test ESMTP'. */
  banner?: string;
  /** TLS key pair to present; default the self-signed SINK_TLS_* pair (see ./certs). */
  tlsKey?: string;
  tlsCert?: string;
  /** Implicit TLS from the first byte (a relay on port 465); default false. */
  secure?: boolean;
  /**
   * Offer AUTH PLAIN/LOGIN and accept these credentials, over plain text too (so a test can see
   * credentials that should never have left in clear). Every AUTH is logged in `auths`.
   */
  auth?: { user: string; pass: string };
  /** Wait this long before accepting the end of DATA (keeps sessions open, so they overlap). */
  dataDelayMs?: number;
}

export interface SinkAuth {
  user: string;
  /** Whether the connection was encrypted when AUTH arrived. */
  tls: boolean;
}

export interface SinkMx {
  port: number;
  /** Messages accepted with 250 at end of DATA, in order. */
  messages: SinkMessage[];
  /** Number of TCP connections accepted so far. */
  connectionCount(): number;
  /** Every AUTH received (when `auth` is set), in order. */
  auths: SinkAuth[];
  /** SMTP sessions from `address` open now, and the most that were open at once so far. */
  openSessions(address: string): number;
  peakSessions(address: string): number;
  /** Resolves when `count` messages have been accepted (rejects after `timeoutMs`, default 5 s). */
  waitForMessages(count: number, timeoutMs?: number): Promise<SinkMessage[]>;
  close(): Promise<void>;
}

export async function startSinkMx(options: SinkMxOptions = {}): Promise<SinkMx> {
  const script = options.script ?? (() => 'accept' as const);
  const tlsMode = options.tls ?? true;
  const messages: SinkMessage[] = [];
  const auths: SinkAuth[] = [];
  const sockets = new Map<number, Socket>();
  let connections = 0;
  const open = new Map<string, number>();
  const peak = new Map<string, number>();
  let transactionCounter = 0;
  // A transaction's index is fixed at MAIL FROM, so RCPT and DATA of one message agree on it.
  const txIndex = new WeakMap<SMTPServerSession['envelope'], number>();

  const dropConnection = (session: SMTPServerSession) => {
    sockets.get(session.remotePort)?.destroy();
  };

  const act = (
    answer: SinkReply | Promise<SinkReply>,
    session: SMTPServerSession,
    done: (err?: Error) => void,
    ok: () => void,
  ) => {
    if (answer instanceof Promise) {
      void answer.then((reply) => act(reply, session, done, ok));
      return;
    }
    const reply = answer;
    if (reply === 'accept') return ok();
    if (reply === 'drop') return dropConnection(session);
    if (reply === 'hang') return; // never answer: the client's timeout must fire
    const err = new Error(reply.message) as Error & { responseCode: number };
    err.responseCode = reply.code;
    done(err);
  };

  const serverOptions: SMTPServerOptions = {
    banner: options.banner ?? 'sink.test ESMTP',
    authOptional: true,
    disabledCommands: [...(tlsMode === false ? ['STARTTLS'] : []), ...(options.auth ? [] : ['AUTH'])],
    ...(options.auth ? { authMethods: ['PLAIN', 'LOGIN'], allowInsecureAuth: true } : {}),
    onAuth(auth, session, callback) {
      auths.push({ user: auth.username ?? '', tls: session.secure });
      const ok = options.auth && auth.username === options.auth.user && auth.password === options.auth.pass;
      callback(ok ? null : new Error('5.7.8 Authentication failed'), ok ? { user: auth.username } : undefined);
    },
    secure: options.secure ?? false,
    hideENHANCEDSTATUSCODES: true,
    key: options.tlsKey ?? SINK_TLS_KEY,
    cert: options.tlsCert ?? SINK_TLS_CERT,
    size: options.size ?? 0,
    logger: false,
    // No reverse DNS for the client: tests must not send queries to the system resolver.
    disableReverseLookup: true,
    closeTimeout: 100,
    // Sessions open per client address: counted by the server's own connect and close (STARTTLS
    // takes every listener off the raw socket, so its 'close' is not seen).
    onConnect(session, callback) {
      const now = (open.get(session.remoteAddress) ?? 0) + 1;
      open.set(session.remoteAddress, now);
      peak.set(session.remoteAddress, Math.max(now, peak.get(session.remoteAddress) ?? 0));
      callback();
    },
    onClose(session) {
      open.set(session.remoteAddress, (open.get(session.remoteAddress) ?? 1) - 1);
    },
    onMailFrom(_address, session, callback) {
      txIndex.set(session.envelope, transactionCounter++);
      callback();
    },
    onRcptTo(address, session, callback) {
      const reply = script({
        stage: 'rcpt',
        rcpt: address.address,
        mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
        messageIndex: txIndex.get(session.envelope) ?? -1,
        remoteAddress: session.remoteAddress,
      });
      act(reply, session, callback, () => callback());
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const rcptTo = session.envelope.rcptTo.map((r) => r.address);
        const mailFrom = session.envelope.mailFrom ? session.envelope.mailFrom.address : '';
        const reply = script({
          stage: 'data',
          rcpt: rcptTo[0] ?? '',
          mailFrom,
          messageIndex: txIndex.get(session.envelope) ?? -1,
          remoteAddress: session.remoteAddress,
        });
        const accept = () => {
          messages.push({
            mailFrom,
            rcptTo,
            raw: Buffer.concat(chunks),
            tls: session.secure,
            heloName: session.hostNameAppearsAs,
            remotePort: session.remotePort,
            remoteAddress: session.remoteAddress,
            receivedAt: Date.now(),
          });
          callback(null);
        };
        const answer = () => act(reply, session, callback, accept);
        if (options.dataDelayMs) setTimeout(answer, options.dataDelayMs);
        else answer();
      });
    },
  };
  if (tlsMode === 'broken') {
    // Node refuses TLS 1.0 by default (minVersion TLSv1.2), so every handshake fails.
    Object.assign(serverOptions, { minVersion: 'TLSv1', maxVersion: 'TLSv1' });
  }

  const server = new SMTPServer(serverOptions);
  // Keep the raw sockets so 'drop' can cut a session and close() needn't wait for clients.
  server.server.on('connection', (socket: Socket) => {
    connections++;
    const port = socket.remotePort ?? 0;
    sockets.set(port, socket);
    socket.on('close', () => sockets.delete(port));
  });
  // smtp-server emits 'error' for client misbehaviour (e.g. dropped sockets); tests expect those.
  server.on('error', () => {});

  await new Promise<void>((resolve, reject) => {
    server.server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const port = (server.server.address() as AddressInfo).port;

  return {
    port,
    messages,
    auths,
    connectionCount: () => connections,
    openSessions: (address) => open.get(address) ?? 0,
    peakSessions: (address) => peak.get(address) ?? 0,
    async waitForMessages(count, timeoutMs = 5000) {
      const deadline = Date.now() + timeoutMs;
      while (messages.length < count) {
        if (Date.now() > deadline) throw new Error(`sink: ${messages.length}/${count} messages after ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 10));
      }
      return messages;
    },
    close() {
      for (const socket of sockets.values()) socket.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
