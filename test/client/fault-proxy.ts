/**
 * A loopback HTTP proxy in front of the real server that injects the failures a client meets in
 * production. Each incoming request takes the next queued fault (or passes through):
 *
 * - `status`: answers itself (e.g. a 502 from a load balancer, a 429 with Retry-After); the
 *   server never sees the request.
 * - `drop-before`: destroys the client's socket without forwarding (the request never arrived).
 * - `drop-after`: forwards, waits for the server's complete answer (so the side effect has
 *   committed), then destroys the client's socket instead of relaying it: the client cannot know
 *   whether its request took effect.
 * - `delay`: forwards at once, then holds the server's answer for `ms` (a slow answer: the client
 *   times out although the server acted).
 *
 * Every request is logged with its time, method, path, Idempotency-Key and what happened.
 */
import { createServer, type IncomingHttpHeaders, request, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type Fault =
  | { kind: 'status'; status: number; headers?: Record<string, string>; body?: string }
  | { kind: 'drop-before' }
  | { kind: 'drop-after' }
  | { kind: 'delay'; ms: number };

export interface ProxyLogEntry {
  at: number;
  method: string;
  path: string;
  idempotencyKey: string | undefined;
  fault: Fault['kind'] | 'pass';
  /** Status the server answered (absent when the proxy answered or dropped before forwarding). */
  upstreamStatus?: number;
  upstreamHeaders?: IncomingHttpHeaders;
}

interface Upstream {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** JSON error body in the API's shape, for synthetic answers. */
export function errorBody(code: string, message: string): string {
  return JSON.stringify({ errors: [{ code, message }] });
}

export class FaultProxy {
  readonly log: ProxyLogEntry[] = [];
  private readonly faults: Fault[] = [];
  private readonly timers = new Set<NodeJS.Timeout>();
  /** Only requests whose path starts with this take faults (the rest pass): keeps setup calls clean. */
  private scope = '/';

  private constructor(
    private readonly server: Server,
    private readonly target: URL,
  ) {}

  static async start(targetBaseUrl: string): Promise<FaultProxy> {
    const server = createServer();
    const proxy = new FaultProxy(server, new URL(targetBaseUrl));
    server.on('request', (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => proxy.handle(req.method ?? 'GET', req.url ?? '/', req.headers, Buffer.concat(chunks), res));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Queues faults for the next requests (in order) whose path starts with `scope` (default: all). */
  inject(faults: Fault[], scope = '/'): void {
    this.faults.push(...faults);
    this.scope = scope;
  }

  /** Drops unused faults and the log. */
  reset(): void {
    this.faults.length = 0;
    this.log.length = 0;
    this.scope = '/';
  }

  pending(): number {
    return this.faults.length;
  }

  /** Log entries of requests to `path` (exact, without the query). */
  attempts(path: string, method?: string): ProxyLogEntry[] {
    return this.log.filter((e) => e.path === path && (method === undefined || e.method === method));
  }

  async close(): Promise<void> {
    for (const t of this.timers) clearTimeout(t);
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(method: string, url: string, headers: IncomingHttpHeaders, body: Buffer, res: ServerResponse) {
    const path = url.split('?')[0] ?? url;
    const fault = path.startsWith(this.scope) ? this.faults.shift() : undefined;
    const key = headers['idempotency-key'];
    const entry: ProxyLogEntry = {
      at: Date.now(),
      method,
      path,
      idempotencyKey: Array.isArray(key) ? key[0] : key,
      fault: fault?.kind ?? 'pass',
    };
    this.log.push(entry);

    if (fault?.kind === 'status') {
      res.writeHead(fault.status, { 'content-type': 'application/json; charset=utf-8', ...fault.headers });
      res.end(fault.body ?? errorBody('unavailable', `injected ${fault.status}`));
      return;
    }
    if (fault?.kind === 'drop-before') {
      res.socket?.destroy();
      return;
    }
    this.forward(method, url, headers, body).then(
      (up) => {
        entry.upstreamStatus = up.status;
        entry.upstreamHeaders = up.headers;
        if (fault?.kind === 'drop-after') {
          res.socket?.destroy();
          return;
        }
        const relay = () => {
          if (res.destroyed || res.socket?.destroyed) return; // the client gave up meanwhile
          const { connection: _c, 'keep-alive': _k, 'transfer-encoding': _t, ...rest } = up.headers;
          res.writeHead(up.status, rest);
          res.end(up.body);
        };
        if (fault?.kind === 'delay') {
          const t = setTimeout(() => {
            this.timers.delete(t);
            relay();
          }, fault.ms);
          this.timers.add(t);
        } else relay();
      },
      () => res.socket?.destroy(),
    );
  }

  /** One request to the server on its own connection; resolves with the complete answer. */
  private forward(method: string, url: string, headers: IncomingHttpHeaders, body: Buffer): Promise<Upstream> {
    return new Promise((resolve, reject) => {
      const up = request(
        {
          host: this.target.hostname,
          port: this.target.port,
          method,
          path: url,
          headers: { ...headers, host: this.target.host, connection: 'close' },
          agent: false,
        },
        (r) => {
          const chunks: Buffer[] = [];
          r.on('data', (c: Buffer) => chunks.push(c));
          r.on('end', () => resolve({ status: r.statusCode ?? 502, headers: r.headers, body: Buffer.concat(chunks) }));
          r.on('error', reject);
        },
      );
      up.on('error', reject);
      up.end(body);
    });
  }
}
