import { createHmac, randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import { Agent, buildConnector } from 'undici';
import { ForbiddenTargetError, guardedLookup, isForbiddenAddress } from '../../lib/address-guard.ts';
import { BoundedCache } from '../../lib/bounded-cache.ts';
import { checkConnectedAddress } from '../../lib/guarded-connector.ts';
import { checkUrlSyntax } from './ssrf.ts';

/** `whsec_` + base64 of 32 random bytes: the Standard Webhooks secret format. */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/** The HMAC key of a `whsec_` secret (the base64-decoded bytes, as the standard says). */
export function secretKey(secret: string): Buffer {
  return Buffer.from(secret.startsWith('whsec_') ? secret.slice(6) : secret, 'base64');
}

/**
 * Standard Webhooks signature header: `v1,<base64 HMAC-SHA256(key, "{id}.{ts}.{body}")>` per
 * live secret, space-separated (the newest first) so receivers holding either secret verify.
 */
export function signatureHeader(keys: readonly Buffer[], msgId: string, timestamp: number, body: string): string {
  // Fed in two parts: concatenating would copy a batch body (tens of KB) once more per POST.
  const prefix = `${msgId}.${timestamp}.`;
  return keys.map((k) => `v1,${createHmac('sha256', k).update(prefix).update(body).digest('base64')}`).join(' ');
}

/** The outcome of one POST. Failures are values: the dispatcher never has to catch. */
export interface SendResult {
  ok: boolean;
  statusCode: number | null;
  durationMs: number;
  error: string | null;
  /** Delay asked for by a Retry-After header, in ms. */
  retryAfterMs: number | null;
  /** 410 Gone: the receiver asks us to stop for good. */
  gone: boolean;
}

export interface SendRequest {
  url: string;
  msgId: string;
  body: string;
  keys: readonly Buffer[];
}

export interface SenderOptions {
  /** Allow loopback/private targets (operator setting, dev mode, tests). */
  allowPrivate: boolean;
  /** Whole-request deadline. Default 10 s (docs/webhooks.md "Retries and disabling"). */
  timeoutMs?: number;
  /** Open connections per origin. */
  connectionsPerOrigin?: number;
}

const USER_AGENT = 'Postyard-Webhooks/1.0';
/** How often the shared deadline timer looks at the requests in flight. */
const DEADLINE_TICK_MS = 50;
const MAX_ERROR_BODY = 512;

/** Retry-After as seconds or an HTTP date; null when absent or unusable. */
export function parseRetryAfter(value: string | string[] | undefined, now = Date.now()): number | null {
  const v = Array.isArray(value) ? value[0] : value;
  if (!v) return null;
  if (/^\d+$/.test(v.trim())) return Number(v.trim()) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

/**
 * Posts signed webhook bodies with undici. Redirects are never followed (undici's dispatcher
 * does not, and no redirect interceptor is installed): a 3xx is a failed attempt, so a target
 * cannot bounce us to an internal address. Unless private targets are allowed, the connector
 * resolves names through guardedLookup and re-checks the address the socket actually connected
 * to, which also covers literal IPs (net.connect does not call lookup for them).
 */
export class WebhookSender {
  readonly agent: Agent;
  private readonly timeoutMs: number;
  private readonly deadlines = new Deadlines();
  private readonly targets = new BoundedCache<string, { origin: string; path: string } | { error: string }>(10_000);

  constructor(private readonly opts: SenderOptions) {
    this.timeoutMs = opts.timeoutMs ?? 10_000;
    const base = buildConnector({
      timeout: this.timeoutMs,
      ...(opts.allowPrivate ? {} : { lookup: guardedLookup }),
    } as buildConnector.BuildOptions);
    const connect = opts.allowPrivate ? base : checkConnectedAddress(base);
    this.agent = new Agent({
      connect,
      connections: opts.connectionsPerOrigin ?? 32,
      keepAliveTimeout: 30_000,
      headersTimeout: this.timeoutMs,
      bodyTimeout: this.timeoutMs,
    });
  }

  async send(req: SendRequest): Promise<SendResult> {
    const started = performance.now();
    const done = (r: Partial<SendResult>): SendResult => ({
      ok: false,
      statusCode: null,
      error: null,
      retryAfterMs: null,
      gone: false,
      ...r,
      durationMs: Math.round(performance.now() - started),
    });
    const target = this.target(req.url);
    if ('error' in target) return done({ error: target.error });
    const timestamp = Math.floor(Date.now() / 1000);
    const signal = this.deadlines.start(this.timeoutMs);
    try {
      const res = await this.agent.request({
        origin: target.origin,
        path: target.path,
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': USER_AGENT,
          'webhook-id': req.msgId,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': signatureHeader(req.keys, req.msgId, timestamp, req.body),
        },
        body: req.body,
        signal,
      });
      const status = res.statusCode;
      if (status >= 200 && status < 300) {
        await res.body.dump().catch(() => {});
        return done({ ok: true, statusCode: status });
      }
      const text = await readSome(res.body);
      return done({
        statusCode: status,
        error: `HTTP ${status}${text ? `: ${text}` : ''}`,
        retryAfterMs: parseRetryAfter(res.headers['retry-after']),
        gone: status === 410,
      });
    } catch (err) {
      return done({ error: describe(err, signal.aborted, this.timeoutMs) });
    } finally {
      this.deadlines.end(signal);
    }
  }

  /**
   * The URL checks that need no DNS (syntax; a literal forbidden IP is refused before any packet
   * is sent: no port-scan oracle), kept per URL: every POST to a webhook repeats them otherwise.
   * The address actually connected to is still checked on every connection (the connector).
   */
  private target(url: string): { origin: string; path: string } | { error: string } {
    let t = this.targets.get(url);
    if (!t) {
      const syntax = checkUrlSyntax(url);
      if (!syntax.ok || !syntax.url) t = { error: syntax.message ?? 'invalid url' };
      else {
        const host = syntax.url.hostname.replace(/^\[|\]$/g, '');
        t =
          !this.opts.allowPrivate && isIP(host) && isForbiddenAddress(host)
            ? { error: `refused: ${host} is a private, loopback, link-local or reserved address` }
            : { origin: syntax.url.origin, path: `${syntax.url.pathname}${syntax.url.search}` };
      }
      this.targets.set(url, t);
    }
    return t;
  }

  async close(): Promise<void> {
    this.deadlines.stop();
    await this.agent.close().catch(() => {});
  }
}

/**
 * The whole-request deadline of every POST (connect, queueing for a connection, headers and
 * body: docs/webhooks.md "Retries and disabling"), kept by one shared timer instead of an AbortSignal.timeout() per
 * request: a timer and an EventTarget per POST cost more than formatting the request (profile
 * of bench:webhooks). A Deadline is the minimal signal undici accepts (aborted, reason and
 * add/removeEventListener); it fires at most DEADLINE_TICK_MS after its time.
 */
class Deadline {
  aborted = false;
  reason: unknown = undefined;
  private listener: (() => void) | null = null;
  constructor(readonly at: number) {}
  addEventListener(_type: 'abort', listener: () => void): void {
    this.listener = listener;
  }
  removeEventListener(): void {
    this.listener = null;
  }
  fire(): void {
    this.aborted = true;
    this.reason = new DOMException('The operation was aborted due to timeout', 'TimeoutError');
    const l = this.listener;
    this.listener = null;
    l?.();
  }
}

class Deadlines {
  private readonly live = new Set<Deadline>();
  private timer: NodeJS.Timeout | null = null;

  start(ms: number): Deadline {
    const d = new Deadline(performance.now() + ms);
    this.live.add(d);
    if (!this.timer) {
      this.timer = setInterval(() => this.sweep(), DEADLINE_TICK_MS);
      this.timer.unref();
    }
    return d;
  }

  end(d: Deadline): void {
    this.live.delete(d);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  private sweep(): void {
    if (this.live.size === 0) {
      this.stop();
      return;
    }
    const now = performance.now();
    // Every deadline of a sender has the same length, so insertion order is deadline order.
    for (const d of this.live) {
      if (now < d.at) break;
      this.live.delete(d);
      d.fire();
    }
  }
}

async function readSome(body: { text(): Promise<string>; dump(opts?: { limit: number }): Promise<void> }) {
  // Only the start of an error body is worth keeping; a huge one is drained and dropped.
  try {
    const text = await Promise.race([body.text(), new Promise<string>((r) => setTimeout(() => r(''), 1000).unref())]);
    return text.slice(0, MAX_ERROR_BODY).replace(/\s+/g, ' ').trim();
  } catch {
    return '';
  }
}

function describe(err: unknown, timedOut: boolean, timeoutMs: number): string {
  if (timedOut) return `no answer within ${timeoutMs / 1000} s`;
  let e = err as (Error & { code?: string; cause?: unknown }) | undefined;
  // undici wraps the connector's error; report the innermost cause (e.g. the SSRF refusal).
  while (e?.cause instanceof Error) e = e.cause as Error & { code?: string; cause?: unknown };
  if (e instanceof ForbiddenTargetError) return `refused: ${e.message}`;
  const code = e?.code ? `${e.code}: ` : '';
  return `${code}${e?.message ?? String(err)}`.slice(0, MAX_ERROR_BODY);
}
