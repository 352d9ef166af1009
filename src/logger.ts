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
        // pino's `*` spans exactly one level, so top-level names are listed too (before, a
        // top-level `password` or a bare `headers.cookie` was written out in clear).
        paths: [
          'req.headers.authorization',
          'req.headers.cookie',
          'req.headers["x-csrf-token"]',
          'headers.authorization',
          'headers.cookie',
          'headers["x-csrf-token"]',
          '*.headers.authorization',
          '*.headers.cookie',
          'password',
          'secret',
          'key',
          'api_key',
          'token',
          '*.password',
          '*.secret',
          '*.key',
          '*.api_key',
          '*.token',
        ],
        censor: '[redacted]',
      },
    },
    destination,
  );
}
