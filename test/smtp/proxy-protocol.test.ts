import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SmtpSetup, setupSmtp } from './helpers.ts';

/**
 * POSTYARD_SMTP_PROXY_PROTOCOL: behind a TCP balancer the client address comes from the PROXY
 * v1 header, so per-address limits (here 1 connection per address) apply per real client.
 */
let s: SmtpSetup;
beforeAll(async () => {
  s = await setupSmtp({ POSTYARD_SMTP_PROXY_PROTOCOL: '127.0.0.1', POSTYARD_SMTP_MAX_CONNECTIONS_PER_IP: '1' });
});
afterAll(async () => s?.close());

/** Connects as the balancer would for `client`; resolves with the server's first line. */
async function viaProxy(client: string): Promise<{ first: string; socket: net.Socket }> {
  const socket = net.connect({ host: '127.0.0.1', port: s.smtp.port });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('error', reject);
  });
  socket.write(`PROXY TCP4 ${client} 127.0.0.1 40000 ${s.smtp.port}\r\n`);
  const first = await new Promise<string>((resolve) => {
    let buf = '';
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => {
      buf += d;
      if (buf.includes('\r\n')) resolve(buf.split('\r\n')[0] ?? '');
    });
    socket.on('close', () => resolve(buf));
  });
  return { first, socket };
}

describe('SMTP behind a PROXY-protocol balancer', () => {
  it('counts connections per client address from the header, not per balancer', async () => {
    const a = await viaProxy('203.0.113.10');
    const b = await viaProxy('203.0.113.11');
    expect(a.first).toMatch(/^220 /);
    expect(b.first).toMatch(/^220 /);
    // A second connection of the same client is over its limit of 1.
    const a2 = await viaProxy('203.0.113.10');
    expect(a2.first).toMatch(/^421 .*203\.0\.113\.10/);
    for (const c of [a, b, a2]) c.socket.destroy();
  });
});
