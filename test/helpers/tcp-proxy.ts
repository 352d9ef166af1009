/**
 * A TCP proxy on 127.0.0.1 in front of another loopback service (the test PostgreSQL), that a
 * test can cut: every open connection is reset and new ones are refused, as when the database
 * host goes away; restore() listens again on the same port.
 */
import { once } from 'node:events';
import net from 'node:net';

export interface TcpProxy {
  port: number;
  /** Destroys every proxied connection and stops listening (new connections: ECONNREFUSED). */
  cut(): Promise<void>;
  /** Listens again on the same port. */
  restore(): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, target.host);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  const cut = async () => {
    const closed = server.listening ? once(server, 'close') : Promise.resolve();
    server.close();
    for (const s of sockets) s.resetAndDestroy();
    await closed;
  };
  return {
    port,
    cut,
    async restore() {
      server.listen(port, '127.0.0.1');
      await once(server, 'listening');
    },
    close: cut,
  };
}
