/**
 * `/metrics` for a node without the api role (worker, smtp or inbound only): a bare HTTP listener
 * on POSTYARD_METRICS_PORT that answers GET /metrics and nothing else. Nodes with the api role
 * serve /metrics on the API port instead (src/http/plugins/metrics.ts).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

export interface MetricsServer {
  port: number;
  close(): Promise<void>;
}

export async function startMetricsServer(registry: Registry, port: number, host: string): Promise<MetricsServer> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('Not Found');
      return;
    }
    registry.metrics().then(
      (text) => {
        res.writeHead(200, { 'content-type': registry.contentType });
        res.end(req.method === 'HEAD' ? undefined : text);
      },
      () => res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end('metrics collection failed'),
    );
  });
  // Scrapers keep connections alive; a stop must not wait for them.
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
