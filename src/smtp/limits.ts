import type { Container } from '../container.ts';
import { BoundedCache } from '../lib/bounded-cache.ts';
import { reply, type SmtpReply } from './replies.ts';

/** Failed AUTH attempts allowed on one connection: each costs an scrypt hash, so cap them. */
export const MAX_AUTH_FAILURES = 3;

/**
 * Per-client limits of the submission server.
 * - Connections per client IP and per SMTP credential: counted on this node (a connection lives
 *   on one node; several nodes each apply the limit).
 * - Messages per credential per minute: a token bucket (burst = the per-minute figure) in the
 *   shared rate-limit store, so it holds across nodes like the API's per-key limit.
 * - A deleted credential stops working on open connections too, after at most
 *   POSTYARD_AUTH_CACHE_SECONDS (the same bound API keys have).
 */
export class SmtpLimits {
  private readonly perIp = new Map<string, number>();
  private readonly perCredential = new Map<string, Set<string>>();
  private readonly sessions = new Map<string, { ip: string; credentialId: string | null }>();
  private readonly activeCache = new BoundedCache<string, { active: boolean; checkedAt: number }>(10_000);

  constructor(private readonly c: Container) {}

  /** On connect: null when allowed (and counted), else the reply that refuses the client. */
  openConnection(sessionId: string, ip: string): SmtpReply | null {
    const n = this.perIp.get(ip) ?? 0;
    if (n >= this.c.config.smtpMaxConnectionsPerIp) {
      return reply.tooManyConnections(
        `Too many connections from ${ip} (limit ${this.c.config.smtpMaxConnectionsPerIp}), try again later`,
      );
    }
    this.perIp.set(ip, n + 1);
    this.sessions.set(sessionId, { ip, credentialId: null });
    return null;
  }

  /** After a successful AUTH: counts the connection against the credential. */
  authenticate(sessionId: string, credentialId: string): SmtpReply | null {
    const set = this.perCredential.get(credentialId) ?? new Set<string>();
    if (set.size >= this.c.config.smtpMaxConnectionsPerCredential) {
      return reply.tooManyConnections(
        `Too many connections for this SMTP credential (limit ${this.c.config.smtpMaxConnectionsPerCredential}), try again later`,
      );
    }
    set.add(sessionId);
    this.perCredential.set(credentialId, set);
    const s = this.sessions.get(sessionId);
    if (s) s.credentialId = credentialId;
    return null;
  }

  closeConnection(sessionId: string): void {
    const s = this.sessions.get(sessionId);
    if (!s) return;
    this.sessions.delete(sessionId);
    const n = (this.perIp.get(s.ip) ?? 1) - 1;
    if (n <= 0) this.perIp.delete(s.ip);
    else this.perIp.set(s.ip, n);
    if (s.credentialId) {
      const set = this.perCredential.get(s.credentialId);
      set?.delete(sessionId);
      if (set?.size === 0) this.perCredential.delete(s.credentialId);
    }
  }

  /** At MAIL FROM: takes one message from the credential's per-minute budget. */
  async takeMessage(credentialId: string): Promise<SmtpReply | null> {
    const perMinute = this.c.config.smtpMessagesPerMinute;
    if (perMinute === 0) return null;
    const d = await this.c.rateLimiter.check(`smtp:${credentialId}`, { rps: perMinute / 60, burst: perMinute });
    if (d.allowed) return null;
    return reply.rateLimited(
      `Rate limit of ${perMinute} messages per minute for this SMTP credential exceeded, try again in ${d.retryAfterSeconds} s`,
    );
  }

  /** False once the credential was deleted (cached at most authCacheSeconds). */
  async credentialActive(credentialId: string): Promise<boolean> {
    const now = Date.now();
    const hit = this.activeCache.get(credentialId);
    if (hit && now - hit.checkedAt < this.c.config.authCacheSeconds * 1000) return hit.active;
    const row = await this.c.database.db
      .selectFrom('smtp_credentials')
      .select('id')
      .where('id', '=', credentialId)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
    this.activeCache.set(credentialId, { active: !!row, checkedAt: now });
    return !!row;
  }

  /** Open connections per IP (for tests and metrics). */
  connectionsFrom(ip: string): number {
    return this.perIp.get(ip) ?? 0;
  }
}
