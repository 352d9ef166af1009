import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyServerOptions } from 'fastify';
import type { Config } from '../config.ts';

/**
 * Node HTTP server settings that cut off slow and malformed clients (test/fuzz/http-limits):
 *
 * - Fastify turns Node's request timeout off by default, so a client trickling a body a byte at a
 *   time (or stalling half-way) held its connection and request forever. Now the headers must
 *   arrive within POSTYARD_HTTP_HEADERS_TIMEOUT_SECONDS and the whole request within
 *   POSTYARD_HTTP_REQUEST_TIMEOUT_SECONDS (the handler's own time is not counted), else 408.
 * - Node checks those deadlines every connectionsCheckingInterval (30 s by default); a quarter
 *   of the shorter timeout keeps the cut-off close to the configured time.
 * - Requests that Node's parser refuses (bad request line, bad header bytes, headers over 16 KB,
 *   broken chunked encoding) and timed-out ones are answered with the contract's error body
 *   (`invalid_request`) and an X-Request-ID, not Fastify's own `{"error","message","statusCode"}`.
 * - An HTTP/1.1 request without Host got Node's bare `400` with an empty body; Node's check is
 *   off and input-guard.ts answers it with the contract's body instead.
 */
export function httpServerOptions(config: Config): Partial<FastifyServerOptions> & { http: object } {
  const headersMs = config.httpHeadersTimeoutSeconds * 1000;
  const requestMs = config.httpRequestTimeoutSeconds * 1000;
  return {
    requestTimeout: requestMs,
    keepAliveTimeout: config.httpKeepAliveTimeoutSeconds * 1000,
    http: {
      headersTimeout: headersMs,
      requestTimeout: requestMs,
      connectionsCheckingInterval: Math.max(100, Math.min(30_000, Math.floor(Math.min(headersMs, requestMs) / 4))),
      requireHostHeader: false,
    },
    clientErrorHandler,
    // Behind a load balancer, req.ip (per-address limits, logs) and req.protocol (Secure cookies)
    // come from X-Forwarded-For / -Proto, but only when the connection is from a listed proxy.
    ...(config.trustProxy ? { trustProxy: config.trustProxy } : {}),
  };
}

const CLIENT_ERRORS: Record<string, [number, string]> = {
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'The request was not received in time; connection closed'],
  HPE_HEADER_OVERFLOW: [431, 'Request headers are too large'],
};

function clientErrorHandler(err: NodeJS.ErrnoException, socket: Duplex) {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  // A response already on its way cannot be replaced by another one.
  const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (socket.writable && !inFlight?.headersSent) {
    const [status, message] = CLIENT_ERRORS[err.code ?? ''] ?? [400, 'Malformed HTTP request'];
    const body = JSON.stringify({ errors: [{ code: 'invalid_request', message }] });
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nX-Request-ID: ${randomUUID()}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(err);
}
