import type { Logger } from 'pino';
import type { SMTPServerAuthentication, SMTPServerAuthenticationResponse, SMTPServerSession } from 'smtp-server';
import type { Container } from '../container.ts';
import type { SubmissionServer } from './connection.ts';
import { MAX_AUTH_FAILURES, type SmtpLimits } from './limits.ts';
import { SmtpReply } from './replies.ts';
import type { SmtpUser } from './submission.ts';

type AuthCallback = (err: Error | null | undefined, response?: SMTPServerAuthenticationResponse) => void;

/**
 * AUTH PLAIN / LOGIN against the hashed SMTP credentials. Bad credentials answer 535 5.7.8 at
 * AUTH time (never later); the third failure on one connection closes it, because every
 * attempt costs a deliberately slow scrypt verification. Whether AUTH may happen without TLS
 * is decided before this runs (SubmissionConnection.handler_AUTH).
 */
export function createAuthHandler(c: Container, limits: SmtpLimits, server: () => SubmissionServer, log: Logger) {
  return (auth: SMTPServerAuthentication, session: SMTPServerSession, callback: AuthCallback): void => {
    const username = auth.username ?? '';
    const password = typeof auth.password === 'string' ? auth.password : '';
    const conn = server().connectionOf(session.id);
    c.smtpCredentials
      .verify(username, password)
      .then((found) => {
        if (!found) {
          const failures = conn ? ++conn.authFailures : MAX_AUTH_FAILURES;
          log.info({ username: username.slice(0, 64), ip: session.remoteAddress, failures }, 'SMTP AUTH failed');
          if (failures >= MAX_AUTH_FAILURES) {
            return callback(null, {
              responseCode: 421,
              message: '4.7.0 Too many failed authentication attempts, closing connection',
            });
          }
          return callback(null, { responseCode: 535, message: '5.7.8 Authentication credentials invalid' });
        }
        const refused = limits.authenticate(session.id, found.credentialId);
        if (refused) return callback(null, { responseCode: refused.responseCode, message: refused.message });
        conn?.progress();
        const user: SmtpUser = { tenantId: found.tenantId, credentialId: found.credentialId, username };
        callback(null, { user });
      })
      .catch((err: unknown) => {
        log.error({ err }, 'SMTP AUTH lookup failed');
        callback(new SmtpReply(454, '4.7.0', 'Temporary authentication failure, try again later'));
      });
  };
}
