/**
 * One connection to an MX or relay, below the mail transactions (smtp-session.ts builds on it):
 * connecting within the timeouts, the greeting, EHLO (HELO as fallback), STARTTLS, AUTH, and the
 * primitives every exchange uses: write commands, read the next reply with a deadline, turn what
 * went wrong into a failure value. Nothing here throws to callers of the session.
 * - Transcript: every command and reply line, except message bodies (one "<N bytes of message
 *   data>" line stands in) and AUTH arguments (masked).
 * - TLS (docs/operations.md "Outbound TLS"): the certificate is always checked against `host` (trusted chain and name)
 *   and the result recorded (`tlsVerified`, a transcript line). 'opportunistic' goes on whatever
 *   the check says, and a failed handshake sets `tlsFailed` so the session can reconnect once in
 *   plain text; 'required' fails the session when there is no TLS, and `verifyCertificate` when
 *   the certificate does not verify, before AUTH or any mail command.
 * - AUTH is refused here over a connection without TLS, whatever the caller asked.
 */
import net from 'node:net';
import tls from 'node:tls';
import type { AttemptFailure, SessionOptions, SmtpStage, SmtpTimeouts } from './smtp-types.ts';
import {
  type Extensions,
  NO_EXTENSIONS,
  parseEhlo,
  parseReply,
  type Reply,
  ReplyReader,
  WireError,
} from './smtp-wire.ts';

/** A failure value travelling up through the dialogue as an exception (caught in one place). */
export class Failed extends Error {
  constructor(readonly failure: AttemptFailure) {
    super(failure.response);
  }
}

const oneLine = (text: string) => text.replace(/\s+/g, ' ').trim();

export class SmtpLink {
  alive = false;
  tls = false;
  tlsVerified: boolean | null = null;

  protected socket: net.Socket | tls.TLSSocket | null = null;
  protected reader = new ReplyReader();
  protected ext: Extensions = NO_EXTENSIONS;
  protected lines: string[] = [];
  protected stage: SmtpStage = 'connect';
  protected tlsFailed = false;

  constructor(
    protected readonly o: SessionOptions,
    protected readonly t: SmtpTimeouts,
  ) {}

  protected get where(): string {
    return `${this.o.host} [${this.o.address ?? this.o.host}]:${this.o.port ?? 25}`;
  }

  protected async connect(ignoreTLS: boolean): Promise<void> {
    this.teardown();
    this.reader = new ReplyReader();
    this.stage = 'connect';
    this.tlsVerified = null;
    this.lines.push(`*: connecting to ${this.where}${this.o.secure ? ' (implicit TLS)' : ''}`);
    const socket = await this.dial();
    this.adopt(socket);
    if (this.tls) this.checkCertificate(socket as tls.TLSSocket);
    const greeting = await this.read(this.t.greetingMs, 'the greeting');
    if (greeting.code !== 220) throw this.replyFailure(greeting, false);
    await this.ehlo();
    const required = this.o.tlsMode === 'required';
    if (!ignoreTLS && !this.tls && this.ext.starttls) {
      this.stage = 'ehlo';
      this.write(['STARTTLS']);
      const r = await this.read(this.t.commandMs, 'the reply to STARTTLS');
      if (r.code === 220) {
        await this.startTls();
        await this.ehlo();
      } else if (required) throw this.replyFailure(r, false);
      else this.lines.push('*: STARTTLS refused; going on without TLS');
    }
    if (required && !this.tls) throw this.tlsRequired(`${this.o.host} does not offer STARTTLS`);
    const proto = this.tls ? (this.socket as tls.TLSSocket).getProtocol() : null;
    this.lines.push(`*: connected, ${this.tls ? `TLS ${proto ?? ''}`.trim() : 'no TLS'}`);
  }

  /** TCP (or implicit TLS) connection within the connect timeout. */
  protected dial(): Promise<net.Socket | tls.TLSSocket> {
    const host = this.o.address ?? this.o.host;
    const port = this.o.port ?? 25;
    const local = this.o.localAddress ? { localAddress: this.o.localAddress } : {};
    return new Promise((resolve, reject) => {
      const socket = this.o.secure
        ? tls.connect({ host, port, ...local, ...this.tlsOptions() })
        : net.connect({ host, port, ...local });
      const timer = setTimeout(() => {
        socket.destroy();
        this.lines.push(`*: timeout after ${this.t.connectMs} ms connecting`);
        reject(new WireError(`timeout after ${this.t.connectMs} ms connecting`, 'timeout'));
      }, this.t.connectMs);
      socket.once(this.o.secure ? 'secureConnect' : 'connect', () => {
        clearTimeout(timer);
        socket.removeListener('error', onError);
        resolve(socket);
      });
      const onError = (err: Error) => {
        clearTimeout(timer);
        reject(new WireError(oneLine(err.message), 'error'));
      };
      socket.once('error', onError);
    });
  }

  /**
   * The handshake never fails on the certificate itself (rejectUnauthorized: false): Node still
   * checks the chain and, through checkServerIdentity, `host` (not the address connected to),
   * and reports it as `authorized`, which checkCertificate() records and enforces when asked.
   */
  protected tlsOptions(): tls.ConnectionOptions {
    return {
      rejectUnauthorized: false,
      ...(net.isIP(this.o.host) ? {} : { servername: this.o.host }),
      checkServerIdentity: (_name, cert) => tls.checkServerIdentity(this.o.host, cert),
      ...(this.o.secureContext ? { secureContext: this.o.secureContext } : {}),
    };
  }

  /** Records whether the certificate verified; with `verifyCertificate`, ends the session if not. */
  protected checkCertificate(socket: tls.TLSSocket): void {
    this.tlsVerified = socket.authorized;
    if (socket.authorized) {
      this.lines.push(`*: certificate verified for ${this.o.host}`);
      return;
    }
    const why = oneLine(String(socket.authorizationError ?? 'unknown reason'));
    this.lines.push(`*: certificate not verified for ${this.o.host} (${why})`);
    if (this.o.verifyCertificate) throw this.tlsRequired(`the certificate of ${this.o.host} did not verify (${why})`);
  }

  /** TLS was required and is not there (or not verified): transient, nothing was sent. */
  protected tlsRequired(why: string): Failed {
    this.lines.push(`*: TLS required: ${why}; nothing sent`);
    return new Failed({
      ok: false,
      permanent: false,
      stage: 'connect',
      response: `TLS required: ${why}`,
      tls: this.tls,
      tlsVerified: this.tlsVerified,
      transcript: this.lines,
    });
  }

  /** Makes `socket` the session's connection: replies go to the reader, loss of it fails reads. */
  protected adopt(socket: net.Socket | tls.TLSSocket): void {
    this.socket = socket;
    // TCP_NODELAY, as MTAs do: with Nagle on, each message's small final write waits for the
    // peer's delayed ACK (~40 ms), capping a connection near 25 messages per second.
    socket.setNoDelay(true);
    this.alive = true;
    this.tls = socket instanceof tls.TLSSocket && socket.encrypted;
    const reader = this.reader;
    socket.on('data', (chunk: Buffer) => reader.push(chunk));
    socket.on('error', (err) => {
      this.lines.push(`*: ${oneLine(err.message)}`);
      reader.fail(new WireError(oneLine(err.message), 'error'));
    });
    socket.on('close', () => {
      if (this.socket === socket) this.alive = false;
      reader.fail(new WireError('connection closed by the server', 'closed'));
    });
  }

  protected async startTls(): Promise<void> {
    const raw = this.socket as net.Socket;
    if (this.reader.pending) throw new WireError('the server sent data after agreeing to STARTTLS', 'protocol');
    raw.removeAllListeners('data');
    raw.removeAllListeners('error');
    raw.removeAllListeners('close');
    raw.on('error', () => {}); // the TLS socket reports it
    const secure = tls.connect({ socket: raw, ...this.tlsOptions() });
    this.socket = secure;
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          reject(new WireError(`timeout waiting for the TLS handshake`, 'timeout'));
        }, this.t.commandMs);
        secure.once('secureConnect', () => {
          clearTimeout(timer);
          resolve();
        });
        secure.once('error', (err) => {
          clearTimeout(timer);
          reject(new WireError(oneLine(err.message), 'error'));
        });
        secure.once('close', () => {
          clearTimeout(timer);
          reject(new WireError('connection closed during the TLS handshake', 'closed'));
        });
      });
    } catch (err) {
      this.tlsFailed = true;
      if (err instanceof WireError && err.kind === 'timeout')
        this.lines.push(`*: timeout after ${this.t.commandMs} ms waiting for the TLS handshake`);
      throw err;
    }
    secure.removeAllListeners('error');
    secure.removeAllListeners('close');
    this.adopt(secure);
    this.checkCertificate(secure);
  }

  protected async ehlo(): Promise<void> {
    this.stage = 'ehlo';
    this.write([`EHLO ${this.o.ehloName}`]);
    let r = await this.read(this.t.commandMs, 'the reply to EHLO');
    if (r.code >= 500) {
      this.write([`HELO ${this.o.ehloName}`]);
      r = await this.read(this.t.commandMs, 'the reply to HELO');
    }
    if (r.code !== 250) throw this.replyFailure(r, false);
    this.ext = parseEhlo(r.lines);
  }

  protected async login(auth: { user: string; pass: string }): Promise<void> {
    this.stage = 'auth';
    // Credentials never cross an unencrypted connection (docs/operations.md "Outbound TLS"), whatever the options say.
    if (!this.tls) throw this.tlsRequired('credentials are never sent without TLS');
    if (this.ext.auth.includes('PLAIN') || !this.ext.auth.includes('LOGIN')) {
      const token = Buffer.from(`\u0000${auth.user}\u0000${auth.pass}`).toString('base64');
      this.write([`AUTH PLAIN ${token}`], ['AUTH PLAIN ****']);
    } else {
      this.write(['AUTH LOGIN'], ['AUTH LOGIN ****']);
      for (const part of [auth.user, auth.pass]) {
        const r = await this.read(this.t.commandMs, 'the reply to AUTH');
        if (r.code !== 334) throw this.replyFailure(r, false);
        this.write([Buffer.from(part).toString('base64')], ['****']);
      }
    }
    const r = await this.read(this.t.commandMs, 'the reply to AUTH');
    if (r.code !== 235) throw this.replyFailure(r, false);
  }

  // ---- helpers ----------------------------------------------------------------------------

  /** Writes commands in one packet; `shown` replaces them in the transcript (masking). */
  protected write(commands: string[], shown: string[] = commands): void {
    for (const c of shown) this.lines.push(`C: ${c}`);
    this.socket?.write(`${commands.join('\r\n')}\r\n`);
  }

  protected writeData(chunks: Buffer[]): void {
    const socket = this.socket;
    if (!socket) return;
    socket.cork();
    for (const c of chunks) socket.write(c);
    socket.uncork();
  }

  protected async read(timeoutMs: number, what: string): Promise<Reply> {
    try {
      const r = await this.reader.next(timeoutMs, what);
      for (const line of r.lines) this.lines.push(`S: ${line}`);
      return r;
    } catch (err) {
      if (err instanceof WireError && err.kind === 'timeout') {
        this.lines.push(`*: timeout after ${timeoutMs} ms waiting for ${what}`);
        this.teardown();
      }
      throw err;
    }
  }

  /** A reply that ends the exchange; only a 5xx inside a mail transaction is permanent. */
  protected replyFailure(r: Reply, inTransaction: boolean, stage: SmtpStage = this.stage): Failed {
    return new Failed({
      ok: false,
      permanent: inTransaction && r.code >= 500,
      stage,
      response: r.text,
      ...parseReply(r.text),
      tls: this.tls,
      transcript: this.lines,
    });
  }

  /** Refused here, before anything of the transaction was sent: permanent (sending again cannot help). */
  protected localRefusal(why: string): Failed {
    this.lines.push(`*: not sent: ${why}`);
    return new Failed({
      ok: false,
      permanent: true,
      stage: 'mail',
      response: why,
      tls: this.tls,
      transcript: this.lines,
    });
  }

  protected failureOf(err: unknown): AttemptFailure {
    if (err instanceof Failed) return err.failure;
    const wire = err instanceof WireError ? err : new WireError(oneLine(String(err)), 'error');
    if (wire.kind !== 'timeout' && wire.kind !== 'closed' && !this.lines.at(-1)?.includes(wire.message)) {
      this.lines.push(`*: ${wire.message}`);
    }
    // Whatever went wrong, this connection is done (a timed-out read tore it down already).
    this.teardown();
    return {
      ok: false,
      permanent: false,
      stage: wire.kind === 'timeout' ? 'timeout' : this.stage,
      response: wire.message,
      tls: this.tls,
      transcript: this.lines,
    };
  }

  protected teardown(): void {
    this.alive = false;
    const socket = this.socket;
    this.socket = null;
    socket?.destroy();
  }
}
