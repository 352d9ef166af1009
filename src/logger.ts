import { createRequire } from 'node:module';
import { type DestinationStream, type Logger, pino } from 'pino';

/**
 * Logs are JSON (for collectors) unless a person is reading them: `auto` is readable exactly when
 * stdout is a terminal.
 */
export function wantsPrettyLogs(format: 'auto' | 'json' | 'pretty', stdoutIsTty: boolean): boolean {
  return format === 'pretty' || (format === 'auto' && stdoutIsTty);
}

/** pino-pretty as an in-process stream, loaded only when asked for (it is not needed for JSON). */
function prettyStream(): DestinationStream {
  const pretty = createRequire(import.meta.url)('pino-pretty') as (opts: object) => DestinationStream;
  return pretty({
    colorize: process.stdout.isTTY === true,
    translateTime: 'SYS:standard',
    ignore: 'pid,hostname,service',
  });
}

/**
 * Structured JSON logs. Authorization headers, cookies and anything named like a secret are
 * redacted, so a key or password never reaches a log line even if a request object is logged.
 */
export function createLogger(level: string, destination?: DestinationStream, opts: { pretty?: boolean } = {}): Logger {
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
    destination ?? (opts.pretty ? prettyStream() : undefined),
  );
}
