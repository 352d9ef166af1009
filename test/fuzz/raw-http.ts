/**
 * A raw HTTP/1.1 client over a TCP socket, for what no well-behaved client does: oversized
 * bodies that never stop, bytes trickled one at a time, malformed request lines and headers.
 */
import net from 'node:net';

export interface RawResult {
  /** Everything the server sent, as latin1. */
  response: string;
  /** Bytes this client managed to write before the server closed the connection. */
  written: number;
  /** True when the server closed (or reset) the connection; false when we gave up waiting. */
  closedByServer: boolean;
}

export interface RawOptions {
  /** Written repeatedly after `head` (every `everyMs`, or as fast as the socket takes it). */
  repeat?: string | Buffer;
  everyMs?: number;
  /** Stop writing after this many bytes in total (then only wait). */
  maxBytes?: number;
  /** Give up after this long (a generous safety net, not a timing assertion). */
  giveUpMs?: number;
  /** Half-close after `head`: the server sees the end of the stream. */
  end?: boolean;
}

/** Sends `head`, then `repeat` until the server closes the connection or a limit is hit. */
export function rawExchange(port: number, head: string | Buffer, opts: RawOptions = {}): Promise<RawResult> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1', noDelay: true });
    const chunks: Buffer[] = [];
    let written = 0;
    let closed = false;
    let timer: NodeJS.Timeout | undefined;
    const maxBytes = opts.maxBytes ?? Number.POSITIVE_INFINITY;
    const giveUp = setTimeout(() => finish(false), opts.giveUpMs ?? 30_000);

    function finish(byServer: boolean) {
      if (closed) return;
      closed = true;
      clearTimeout(giveUp);
      clearInterval(timer);
      socket.destroy();
      resolve({ response: Buffer.concat(chunks).toString('latin1'), written, closedByServer: byServer });
    }

    function write(data: string | Buffer): boolean {
      if (closed || socket.destroyed) return false;
      written += Buffer.byteLength(data);
      return socket.write(data);
    }

    function flood(data: string | Buffer) {
      while (!closed && written < maxBytes) {
        if (!write(data)) {
          socket.once('drain', () => flood(data));
          return;
        }
      }
    }

    socket.on('data', (d) => chunks.push(d));
    socket.on('error', () => finish(true));
    socket.on('close', () => finish(true));
    socket.once('connect', () => {
      write(head);
      if (opts.end) socket.end();
      const repeat = opts.repeat;
      if (repeat === undefined) return;
      if (opts.everyMs) {
        timer = setInterval(() => {
          if (written < maxBytes) write(repeat);
        }, opts.everyMs);
      } else flood(repeat);
    });
  });
}

export interface ParsedResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** The first HTTP response in `raw`, or null when there is none. */
export function parseResponse(raw: string): ParsedResponse | null {
  const m = /^HTTP\/1\.1 (\d{3})[^\r\n]*\r\n/.exec(raw);
  if (!m) return null;
  const end = raw.indexOf('\r\n\r\n');
  if (end < 0) return null;
  const headers: Record<string, string> = {};
  for (const line of raw.slice(m[0].length, end).split('\r\n')) {
    const i = line.indexOf(':');
    if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  const length = Number(headers['content-length'] ?? '0');
  const body = Buffer.from(raw.slice(end + 4), 'latin1')
    .subarray(0, length)
    .toString('utf8');
  return { status: Number(m[1]), headers, body };
}

/** Throws unless `r` is an HTTP error answer with the contract's body and `code`. */
export function expectContractError(r: ParsedResponse | null, status: number, code: string): void {
  if (!r) throw new Error('no HTTP response');
  if (r.status !== status) throw new Error(`expected ${status}, got ${r.status}: ${r.body}`);
  const body = JSON.parse(r.body) as { errors?: { code?: string; message?: string }[] };
  if (body.errors?.[0]?.code !== code || !body.errors[0].message) {
    throw new Error(`expected error code ${code}: ${r.body}`);
  }
  if (!r.headers['x-request-id']) throw new Error('no X-Request-ID');
}
