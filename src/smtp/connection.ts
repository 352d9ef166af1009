import type net from 'node:net';
import type tls from 'node:tls';
import { SMTPServer, type SMTPServerOptions } from 'smtp-server';
import { SMTPConnection, type SMTPConnectionOptions } from 'smtp-server/lib/smtp-connection.js';

/**
 * smtp-server with the three behaviours its options cannot express:
 * - replies that carry their own enhanced status code ("451 4.7.1 ...") keep it, instead of the
 *   library's per-reply-code default (which would make every 451 a 4.3.0 and every 550 a 5.1.1);
 * - AUTH on a cleartext connection is refused with RFC 3207's `530 5.7.0 Must issue a STARTTLS
 *   command first` before any credential is sent (the library answers 538 there), and also
 *   when no TLS is configured at all, unless the operator allowed cleartext AUTH;
 * - a per-connection "progress deadline": the idle timeout is reset by every byte, so a client
 *   dripping one byte a minute could hold a connection forever; this deadline is reset only
 *   when a step completes (AUTH, MAIL, RCPT, end of DATA).
 * connect() mirrors the library's own (smtp-server 3.21) so that it builds our connection class.
 */
const OWN_ENHANCED_CODE = /^[245]\.\d{1,3}\.\d{1,3} /;

export interface SubmissionServerSettings {
  /** Refuse AUTH on cleartext connections. */
  tlsForAuth: boolean;
  /** STARTTLS is offered (a certificate is configured or generated). */
  tlsAvailable: boolean;
  /** Milliseconds between two completed steps before the connection is closed. */
  deadlineMs: number;
}

export class SubmissionConnection extends SMTPConnection {
  /** Failed AUTH attempts on this connection (each one costs an scrypt verification). */
  authFailures = 0;
  /** When the last step completed (ms); the server's sweep closes connections idle past the deadline. */
  lastProgress = Date.now();
  /** A received message is being stored: the client waits for us, the deadline does not run. */
  storing = false;

  private get settings(): SubmissionServerSettings {
    return (this._server as SubmissionServer).settings;
  }

  override send(code: number, data?: string | string[] | null, context?: string | false): void {
    super.send(code, data, typeof data === 'string' && OWN_ENHANCED_CODE.test(data) ? false : context);
  }

  override handler_AUTH(command: Buffer, callback: () => void): void {
    if (!this.secure && this.settings.tlsForAuth) {
      this.send(
        530,
        this.settings.tlsAvailable
          ? '5.7.0 Must issue a STARTTLS command first'
          : '5.7.0 Authentication requires TLS, which this server does not offer',
      );
      callback();
      return;
    }
    super.handler_AUTH(command, callback);
  }

  /** Marks a completed step (connect, AUTH, MAIL, RCPT, end of DATA): restarts the deadline. */
  progress(): void {
    this.lastProgress = Date.now();
  }
}

export class SubmissionServer extends SMTPServer {
  /** Open connections by session id (= connection id), for handlers that only get the session. */
  readonly bySession = new Map<string, SubmissionConnection>();
  stopping = false;
  private readonly sweep: NodeJS.Timeout;

  constructor(
    options: SMTPServerOptions,
    readonly settings: SubmissionServerSettings,
  ) {
    super(options);
    // One timer for all connections instead of one re-armed per step: checks every quarter of
    // the deadline (at most 1 s), so a connection is cut between 1 and 1.25 deadlines.
    this.sweep = setInterval(() => this.cutSlowClients(), Math.min(1000, Math.max(50, settings.deadlineMs / 4)));
    this.sweep.unref();
    this.server.once('close', () => clearInterval(this.sweep));
  }

  private cutSlowClients(): void {
    const limit = Date.now() - this.settings.deadlineMs;
    for (const conn of this.bySession.values()) {
      // Not while a handler works for the client: then the client is waiting for us.
      if (conn.lastProgress < limit && !conn.storing && !conn._handlerPending && !conn._closing && !conn._closed) {
        conn.send(421, '4.4.2 Too slow: command or message not completed in time, closing connection');
      }
    }
  }

  override connect(socket: net.Socket | tls.TLSSocket, socketOptions?: SMTPConnectionOptions | null): void {
    const connection = new SubmissionConnection(this, socket, socketOptions);
    this.connections.add(connection);
    this.bySession.set(connection.id, connection);
    connection.on('error', (err: Error) => this._onError(err));
    connection.on('connect', (data) => this._onClientConnect(data));
    connection.init();
  }

  connectionOf(sessionId: string): SubmissionConnection | undefined {
    return this.bySession.get(sessionId);
  }

  forget(sessionId: string): void {
    this.bySession.delete(sessionId);
  }

  /**
   * Graceful stop: no new connections; idle sessions get 421 at once; a session inside a mail
   * transaction finishes it (its DATA is answered) and is closed right after; whatever is left
   * after `graceMs` is cut by the library's close timeout.
   */
  shutdown(): Promise<void> {
    this.stopping = true;
    return new Promise((resolve) => {
      this.close(() => resolve());
      for (const conn of this.connections) {
        // Inside a mail transaction (MAIL FROM given, DATA not yet answered): let it finish.
        if (!conn.session.envelope?.mailFrom) conn.send(421, '4.3.2 Server shutting down, try again later');
      }
    });
  }
}
