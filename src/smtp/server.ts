import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { SMTPServerOptions, SMTPServerSession } from 'smtp-server';
import { ConfigError } from '../config.ts';
import type { Container } from '../container.ts';
import { isValidEmail } from '../lib/email.ts';
import { mailMetrics } from '../metrics/mail-metrics.ts';
import { CrlfStream } from '../lib/line-ends.ts';
import { createAuthHandler } from './auth.ts';
import { SubmissionServer } from './connection.ts';
import { SmtpLimits } from './limits.ts';
import { sharedListenerOptions } from './listener-options.ts';
import { receiveData } from './receive-data.ts';
import { reply, SmtpReply, toSmtpReply } from './replies.ts';
import { type SmtpUser, submitMessage } from './submission.ts';
import { resolveTls, type TlsMaterial } from './tls.ts';

export interface SmtpServerOptions {
  /** Default config.smtpPort; 0 picks a free port (tests). */
  port?: number;
  /** Default config.smtpHost. */
  host?: string;
  /** Implicit-TLS port; default config.smtpsPort (null = none). */
  smtpsPort?: number | null;
}

export interface RunningSmtpServer {
  port: number;
  smtpsPort: number | null;
  limits: SmtpLimits;
  /** Graceful: stop accepting, let in-flight DATA finish (10 s at most), then close. */
  close(): Promise<void>;
}

interface Shared {
  limits: SmtpLimits;
  tls: TlsMaterial | null;
  log: Logger;
}

function buildServer(c: Container, { limits, tls, log }: Shared, secure: boolean): SubmissionServer {
  const cfg = c.config;
  const metrics = mailMetrics(c.metrics);
  const listener = sharedListenerOptions(cfg, limits);
  let server: SubmissionServer | undefined;
  const self = () => server as SubmissionServer;

  const options: SMTPServerOptions = {
    name: cfg.ehloName,
    banner: 'Postyard submission',
    secure,
    ...(tls ? { key: tls.key, cert: tls.cert } : {}),
    disabledCommands: tls ? [] : ['STARTTLS'],
    authMethods: ['PLAIN', 'LOGIN'],
    // The TLS-before-AUTH rule is enforced by SubmissionConnection (with RFC 3207's reply).
    allowInsecureAuth: true,
    authRequiredMessage: '5.7.0 Authentication required',
    size: cfg.smtpMaxMessageBytes,
    maxRecipients: cfg.smtpMaxRecipients,
    ...listener,
    onConnect(session, callback) {
      metrics.smtpSessions.inc();
      listener.onConnect?.(session, callback);
    },

    onAuth: createAuthHandler(c, limits, self, log),

    onMailFrom(address, session, callback) {
      const user = session.user as SmtpUser;
      if (address.address !== '' && !isValidEmail(address.address)) {
        return callback(reply.badSender('Bad sender address syntax'));
      }
      (async () => {
        if (!(await limits.credentialActive(user.credentialId))) {
          return new SmtpReply(421, '4.7.0', 'This SMTP credential was deleted, closing connection');
        }
        return limits.takeMessage(user.credentialId);
      })().then(
        (refused) => {
          if (!refused) self().connectionOf(session.id)?.progress();
          callback(refused);
        },
        (err: unknown) => callback(toSmtpReply(err, log, c.metrics)),
      );
    },

    onRcptTo(address, session, callback) {
      if (!isValidEmail(address.address)) return callback(reply.badRecipient('Bad recipient address syntax'));
      self().connectionOf(session.id)?.progress();
      callback();
    },

    onData(stream, session, callback) {
      // Line ends made CRLF chunk by chunk as the data arrives (src/lib/line-ends.ts says why);
      // prepareSubmission then only checks.
      receiveData(
        self(),
        session.id,
        stream,
        callback,
        async (message) => {
          if (!message) {
            metrics.smtpMessages.inc({ result: 'refused' });
            return { refused: reply.tooBig(cfg.smtpMaxMessageBytes) };
          }
          const envelope = {
            mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
            rcptTo: session.envelope.rcptTo.map((r) => r.address),
          };
          try {
            const r = await submitMessage(c, session.user as SmtpUser, message, envelope);
            log.debug(
              { transmission: r.transmissionId, recipients: envelope.rcptTo.length, replayed: r.replayed },
              'SMTP message accepted',
            );
            metrics.smtpMessages.inc({ result: 'accepted' });
            return { ok: `2.0.0 Ok: queued as ${r.transmissionId}` };
          } catch (err) {
            metrics.smtpMessages.inc({ result: 'refused' });
            return { refused: toSmtpReply(err, log, c.metrics) };
          }
        },
        new CrlfStream(),
      );
    },

    onClose(session: SMTPServerSession) {
      limits.closeConnection(session.id);
      self().forget(session.id);
    },
  };

  server = new SubmissionServer(options, {
    tlsForAuth: !cfg.smtpAllowInsecureAuth,
    tlsAvailable: tls !== null,
    deadlineMs: cfg.smtpCommandDeadlineSeconds * 1000,
  });
  server.on('error', (err) => log.warn({ err: err.message }, 'SMTP connection error'));
  return server;
}

function listen(server: SubmissionServer, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.server.once('error', reject);
    server.listen(port, host, () => {
      server.server.off('error', reject);
      resolve((server.server.address() as AddressInfo).port);
    });
  });
}

/** Starts the submission listener (and the implicit-TLS one when configured). */
export async function startSmtpServer(c: Container, opts: SmtpServerOptions = {}): Promise<RunningSmtpServer> {
  const log = c.logger.child({ component: 'smtp' });
  const tls = await resolveTls(c.config, log);
  const smtpsWanted = opts.smtpsPort !== undefined ? opts.smtpsPort : c.config.smtpsPort;
  if (smtpsWanted !== null && !tls) {
    throw new ConfigError(
      'POSTYARD_SMTPS_PORT',
      'implicit TLS needs POSTYARD_SMTP_TLS_CERT and POSTYARD_SMTP_TLS_KEY (or development mode)',
    );
  }
  if (!tls && !c.config.smtpAllowInsecureAuth) {
    log.warn(
      'SMTP submission has no TLS certificate: AUTH is refused until POSTYARD_SMTP_TLS_CERT/KEY are set (or POSTYARD_SMTP_ALLOW_INSECURE_AUTH=true)',
    );
  }
  const limits = new SmtpLimits(c);
  const shared: Shared = { limits, tls, log };
  const host = opts.host ?? c.config.smtpHost;
  const servers: SubmissionServer[] = [];
  try {
    const plain = buildServer(c, shared, false);
    servers.push(plain);
    const port = await listen(plain, opts.port ?? c.config.smtpPort, host);
    let smtpsPort: number | null = null;
    if (smtpsWanted !== null) {
      const implicit = buildServer(c, shared, true);
      servers.push(implicit);
      smtpsPort = await listen(implicit, smtpsWanted, host);
    }
    log.info({ host, port, smtpsPort, tls: tls?.source ?? 'none' }, 'SMTP submission listening');
    let closing: Promise<void> | null = null;
    return {
      port,
      smtpsPort,
      limits,
      close() {
        closing ??= Promise.all(servers.map((s) => s.shutdown())).then(() => undefined);
        return closing;
      },
    };
  } catch (err) {
    await Promise.all(servers.map((s) => (s.server.listening ? s.shutdown() : undefined)));
    throw err;
  }
}
