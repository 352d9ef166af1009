import type { Logger } from 'pino';
import type { SMTPServerAuthentication, SMTPServerAuthenticationResponse, SMTPServerSession } from 'smtp-server';
import type { Container } from '../container.ts';
import { databaseFault } from '../db/faults.ts';
import { countDatabaseFault } from '../metrics/database-faults.ts';
import type { SubmissionServer } from './connection.ts';
import { MAX_AUTH_FAILURES, type SmtpLimits } from './limits.ts';
import { SmtpReply } from './replies.ts';
import type { SmtpUser } from './submission.ts';

function tooManyFromIp(seconds: number): string {
  return `4.7.0 Too many failed authentication attempts from this address, try again in ${seconds} s`;
}

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
    const ip = session.remoteAddress;
    // Brute-force brake across connections (docs/security.md): an address that spent its budget
    // of failed AUTHs is refused before any scrypt work, whatever it sends, until it refills.
    const blocked = c.failedAuth.blockedFor('smtp', ip);
    if (blocked > 0) {
      log.info({ ip, retryAfter: blocked }, 'SMTP AUTH refused: too many failures from this address');
      callback(null, { responseCode: 421, message: tooManyFromIp(blocked) });
      return;
    }
    c.smtpCredentials
      .verify(username, password)
      .then(async (found) => {
        if (!found) {
          const failures = conn ? ++conn.authFailures : MAX_AUTH_FAILURES;
          log.info({ username: username.slice(0, 64), ip, failures }, 'SMTP AUTH failed');
          const wait = await c.failedAuth.recordFailure('smtp', ip);
          if (wait > 0) return callback(null, { responseCode: 421, message: tooManyFromIp(wait) });
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
        // Temporary either way (454); a database fault is counted, not logged as a bug.
        const fault = databaseFault(err);
        if (fault) countDatabaseFault(c.metrics, fault, 'smtp');
        if (fault) log.warn({ err: { message: (err as Error)?.message } }, 'SMTP AUTH lookup failed: database fault');
        else log.error({ err }, 'SMTP AUTH lookup failed');
        callback(new SmtpReply(454, '4.7.0', 'Temporary authentication failure, try again later'));
      });
  };
}
