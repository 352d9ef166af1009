import { type DestinationStream, type Logger, pino } from 'pino';

/**
 * Structured JSON logs. Authorization headers, cookies and anything named like a secret are
 * redacted, so a key or password never reaches a log line even if a request object is logged.
 */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'postyard' },
      redact: {
        paths: [
          'req.headers.authorization',
          'req.headers.cookie',
          'headers.authorization',
          '*.password',
          '*.secret',
          '*.key',
          '*.api_key',
        ],
        censor: '[redacted]',
      },
    },
    destination,
  );
}
