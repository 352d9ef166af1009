import type { Executor } from '../../db/executor.ts';
import type { DashboardSessionsTable, DashboardUsersTable } from '../../db/schema.ts';
import type { SessionInfo } from '../../http/dashboard-session.ts';
import { isoAt, nowIso } from '../../lib/clock.ts';
import { hashPassword, randomBase62, safeEqual, sha256Hex, verifyPassword } from '../../lib/crypto.ts';
import { isValidEmail } from '../../lib/email.ts';
import { notFound, validationError } from '../../lib/errors.ts';
import { newId } from '../../lib/ids.ts';
import type { RateLimiter } from '../../rate-limit/rate-limiter.ts';
import { type SignInAttempt, type SignInBudgets, SignInLimits, signInBudgets } from './sign-in-limits.ts';
import type { IssuedDevice, TrustedDevices } from './trusted-device.ts';

export const MIN_PASSWORD_CHARS = 8;
export const MAX_PASSWORD_CHARS = 1024;

export interface DashboardSettings {
  /** A session ends after this long without a request (sliding). */
  idleTimeoutMs: number;
  /** ...and at the latest this long after sign-in. */
  absoluteTimeoutMs: number;
  /** How long a one-time sign-in link stays valid. */
  linkTtlMs: number;
  /** Budgets of FAILED sign-in attempts (sign-in-limits.ts). */
  signIn: SignInBudgets;
}

export const DEFAULT_DASHBOARD_SETTINGS: DashboardSettings = {
  idleTimeoutMs: 12 * 3600_000,
  absoluteTimeoutMs: 7 * 24 * 3600_000,
  linkTtlMs: 24 * 3600_000,
  signIn: signInBudgets(),
};

/** A session started from a one-time link may set a new password without the old one this long. */
export const LINK_RESET_WINDOW_MS = 3600_000;

/** Sessions are touched (expiry slid forward) at most this often, not on every request. */
const TOUCH_EVERY_MS = 60_000;

// Same cost as a real hash so an unknown email takes as long as a wrong password.
const DUMMY_HASH = 'scrypt$32768$8$1$AAAAAAAAAAAAAAAAAAAAAA==$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=';

export interface DashboardUserView {
  id: string;
  tenant_id: string;
  email: string;
  has_password: boolean;
  created_at: string;
  last_login_at: string | null;
}

export interface StartedSession extends SessionInfo {
  /** The raw token for the cookie; only its hash is stored. */
  token: string;
}

function toUserView(row: DashboardUsersTable): DashboardUserView {
  return {
    id: row.id,
    tenant_id: row.tenant_id,
    email: row.email,
    has_password: row.password_hash !== null,
    created_at: row.created_at,
    last_login_at: row.last_login_at,
  };
}

export function normalizeLoginEmail(raw: unknown): string {
  return typeof raw === 'string' ? raw.trim().toLowerCase() : '';
}

function checkPassword(password: unknown, field = 'password'): string {
  if (typeof password !== 'string' || password.length < MIN_PASSWORD_CHARS || password.length > MAX_PASSWORD_CHARS) {
    throw validationError([
      { field, message: `${field} must be ${MIN_PASSWORD_CHARS} to ${MAX_PASSWORD_CHARS} characters` },
    ]);
  }
  return password;
}

function isUniqueViolation(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}

/**
 * Dashboard accounts: users, password sign-in with rate limits, one-time links, and sessions.
 * Tokens (session cookie, link) are 256-bit random and stored only as SHA-256 hashes.
 */
export class DashboardAccounts {
  private readonly limits: SignInLimits;

  constructor(
    private readonly db: Executor,
    limiter: RateLimiter,
    private readonly devices: TrustedDevices,
    readonly settings: DashboardSettings = DEFAULT_DASHBOARD_SETTINGS,
  ) {
    this.limits = new SignInLimits(limiter, settings.signIn);
  }

  async createUser(tenantId: string, input: { email: unknown; password?: unknown }): Promise<DashboardUserView> {
    const email = normalizeLoginEmail(input.email);
    if (!isValidEmail(email))
      throw validationError([{ field: 'email', message: 'email must be a valid email address' }]);
    const tenant = await this.db.selectFrom('tenants').select('id').where('id', '=', tenantId).executeTakeFirst();
    if (!tenant) throw notFound('Tenant');
    const password = input.password === undefined ? null : checkPassword(input.password);
    const now = nowIso();
    const row: DashboardUsersTable = {
      tenant_id: tenantId,
      id: newId(),
      email,
      password_hash: password === null ? null : await hashPassword(password),
      created_at: now,
      updated_at: now,
      last_login_at: null,
    };
    try {
      await this.db.insertInto('dashboard_users').values(row).execute();
    } catch (err) {
      if (isUniqueViolation(err)) {
        throw validationError([{ field: 'email', message: `a dashboard user with email ${email} already exists` }]);
      }
      throw err;
    }
    return toUserView(row);
  }

  async getUser(tenantId: string, id: string): Promise<DashboardUserView> {
    const row = await this.db
      .selectFrom('dashboard_users')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .executeTakeFirst();
    if (!row) throw notFound('Dashboard user');
    return toUserView(row);
  }

  async findUserByEmail(email: string): Promise<DashboardUserView | null> {
    const row = await this.db
      .selectFrom('dashboard_users')
      .selectAll()
      .where('email', '=', normalizeLoginEmail(email))
      .executeTakeFirst();
    return row ? toUserView(row) : null;
  }

  /** A one-time sign-in link token for `email`'s account (valid linkTtlMs, usable once). */
  async createLoginLink(email: string): Promise<{ token: string; expires_at: string; user: DashboardUserView }> {
    const user = await this.findUserByEmail(email);
    if (!user) throw notFound('Dashboard user');
    const token = randomBase62(43);
    const now = Date.now();
    const expires = isoAt(now + this.settings.linkTtlMs);
    await this.db
      .insertInto('dashboard_login_links')
      .values({
        id: sha256Hex(token),
        tenant_id: user.tenant_id,
        user_id: user.id,
        created_at: isoAt(now),
        expires_at: expires,
        used_at: null,
      })
      .execute();
    return { token, expires_at: expires, user };
  }

  /**
   * Checks the sign-in budgets of an attempt from `ip` for `email` ('' for a one-time link)
   * before its password is (sign-in-limits.ts): throws 429 rate_limited when one is spent. A
   * `deviceCookie` of a trusted device of that account makes the device's own budget the only
   * one that applies. Returns the attempt, for recordLoginFailure when it fails.
   */
  async assertLoginAllowed(ip: string, email: string, deviceCookie?: string): Promise<SignInAttempt> {
    let deviceId: string | null = null;
    if (email && deviceCookie) {
      const user = await this.db
        .selectFrom('dashboard_users')
        .select(['id', 'password_hash'])
        .where('email', '=', email)
        .executeTakeFirst();
      if (user) deviceId = this.devices.verify(deviceCookie, user);
    }
    const attempt = this.limits.attempt(ip, email, deviceId);
    await this.limits.assertAllowed(attempt);
    return attempt;
  }

  /** Counts one failed attempt (see assertLoginAllowed) against every budget it has. */
  async recordLoginFailure(attempt: SignInAttempt): Promise<void> {
    await this.limits.recordFailure(attempt);
  }

  /**
   * A trusted-device cookie for the user's browser after a successful sign-in (or password
   * change): the device id of `deviceCookie` is kept when it was valid for this user, so the
   * device keeps its budget.
   */
  async trustDevice(tenantId: string, userId: string, deviceCookie?: string): Promise<IssuedDevice> {
    const user = await this.db
      .selectFrom('dashboard_users')
      .select(['id', 'password_hash'])
      .where('tenant_id', '=', tenantId)
      .where('id', '=', userId)
      .executeTakeFirstOrThrow();
    const known = this.devices.verify(deviceCookie, user);
    return known ? this.devices.issue(user, known) : this.devices.issue(user);
  }

  /** Email + password -> a new session, or null. Costs one scrypt either way. */
  async loginWithPassword(rawEmail: unknown, password: unknown): Promise<StartedSession | null> {
    const email = normalizeLoginEmail(rawEmail);
    const row = email
      ? await this.db.selectFrom('dashboard_users').selectAll().where('email', '=', email).executeTakeFirst()
      : undefined;
    const pw = typeof password === 'string' ? password.slice(0, MAX_PASSWORD_CHARS) : '';
    const ok = await verifyPassword(pw, row?.password_hash ?? DUMMY_HASH);
    if (!row?.password_hash || !ok) return null;
    return this.startSession(row, false);
  }

  /** Consumes a one-time link (atomically: a second use fails) -> a new session, or null. */
  async loginWithLink(token: unknown): Promise<StartedSession | null> {
    if (typeof token !== 'string' || !/^[0-9A-Za-z]{20,128}$/.test(token)) return null;
    const now = nowIso();
    const res = await this.db
      .updateTable('dashboard_login_links')
      .set({ used_at: now })
      .where('id', '=', sha256Hex(token))
      .where('used_at', 'is', null)
      .where('expires_at', '>', now)
      .executeTakeFirst();
    if (Number(res.numUpdatedRows) !== 1) return null;
    const link = await this.db
      .selectFrom('dashboard_login_links')
      .select(['user_id', 'tenant_id'])
      .where('id', '=', sha256Hex(token))
      .executeTakeFirstOrThrow();
    const user = await this.db
      .selectFrom('dashboard_users')
      .selectAll()
      .where('id', '=', link.user_id)
      .where('tenant_id', '=', link.tenant_id)
      .executeTakeFirst();
    return user ? this.startSession(user, true) : null;
  }

  private async startSession(user: DashboardUsersTable, viaLink: boolean): Promise<StartedSession> {
    const token = randomBase62(43);
    const now = Date.now();
    const row: DashboardSessionsTable = {
      id: sha256Hex(token),
      tenant_id: user.tenant_id,
      user_id: user.id,
      csrf_token: randomBase62(43),
      via_link: viaLink ? 1 : 0,
      created_at: isoAt(now),
      last_seen_at: isoAt(now),
      expires_at: isoAt(now + Math.min(this.settings.idleTimeoutMs, this.settings.absoluteTimeoutMs)),
    };
    await this.db.insertInto('dashboard_sessions').values(row).execute();
    await this.db
      .updateTable('dashboard_users')
      .set({ last_login_at: row.created_at })
      .where('id', '=', user.id)
      .execute();
    await this.purgeExpired(now);
    return { ...toSessionInfo(row), token };
  }

  /** The live session of a cookie token, sliding its idle expiry forward; null when unknown or expired. */
  async resolveSession(token: string | undefined): Promise<SessionInfo | null> {
    if (!token || !/^[0-9A-Za-z]{20,128}$/.test(token)) return null;
    const id = sha256Hex(token);
    const row = await this.db.selectFrom('dashboard_sessions').selectAll().where('id', '=', id).executeTakeFirst();
    const now = Date.now();
    if (!row || !safeEqual(row.id, id) || Date.parse(row.expires_at) <= now) return null;
    if (now - Date.parse(row.last_seen_at) > TOUCH_EVERY_MS) {
      const hardEnd = Date.parse(row.created_at) + this.settings.absoluteTimeoutMs;
      row.last_seen_at = isoAt(now);
      row.expires_at = isoAt(Math.min(now + this.settings.idleTimeoutMs, hardEnd));
      await this.db
        .updateTable('dashboard_sessions')
        .set({ last_seen_at: row.last_seen_at, expires_at: row.expires_at })
        .where('id', '=', id)
        .execute();
    }
    return toSessionInfo(row);
  }

  async endSession(sessionId: string): Promise<void> {
    await this.db.deleteFrom('dashboard_sessions').where('id', '=', sessionId).execute();
  }

  /**
   * Sets the user's password. The current password is required unless the user has none yet or
   * signed in with a one-time link less than LINK_RESET_WINDOW_MS ago (the link is how a
   * forgotten password is reset). The user's other sessions end.
   */
  async setPassword(
    session: SessionInfo,
    input: { password: unknown; current_password?: unknown },
    /** The sign-in attempt this is (assertLoginAllowed): a wrong current password counts as its failure. */
    attempt?: SignInAttempt,
  ): Promise<void> {
    const password = checkPassword(input.password);
    const row = await this.db
      .selectFrom('dashboard_users')
      .selectAll()
      .where('tenant_id', '=', session.tenantId)
      .where('id', '=', session.userId)
      .executeTakeFirst();
    if (!row) throw notFound('Dashboard user');
    const freshLink = session.viaLink && Date.now() - Date.parse(session.createdAt) < LINK_RESET_WINDOW_MS;
    if (row.password_hash && !freshLink) {
      const current = typeof input.current_password === 'string' ? input.current_password : '';
      if (!(await verifyPassword(current.slice(0, MAX_PASSWORD_CHARS), row.password_hash))) {
        if (attempt) await this.recordLoginFailure(attempt);
        throw validationError([{ field: 'current_password', message: 'current password is incorrect' }]);
      }
    }
    await this.db
      .updateTable('dashboard_users')
      .set({ password_hash: await hashPassword(password), updated_at: nowIso() })
      .where('id', '=', row.id)
      .execute();
    await this.db
      .deleteFrom('dashboard_sessions')
      .where('user_id', '=', row.id)
      .where('id', '!=', session.sessionId)
      .execute();
  }

  /** Drops expired sessions and links (bounded; runs on every sign-in). */
  async purgeExpired(now = Date.now()): Promise<void> {
    const cutoff = isoAt(now);
    await this.db
      .deleteFrom('dashboard_sessions')
      .where('id', 'in', (eb) =>
        eb.selectFrom('dashboard_sessions').select('id').where('expires_at', '<=', cutoff).limit(500),
      )
      .execute();
    await this.db
      .deleteFrom('dashboard_login_links')
      .where('id', 'in', (eb) =>
        eb.selectFrom('dashboard_login_links').select('id').where('expires_at', '<=', cutoff).limit(500),
      )
      .execute();
  }
}

function toSessionInfo(row: DashboardSessionsTable): SessionInfo {
  return {
    sessionId: row.id,
    tenantId: row.tenant_id,
    userId: row.user_id,
    csrfToken: row.csrf_token,
    viaLink: row.via_link === 1,
    createdAt: row.created_at,
    expiresAt: row.expires_at,
  };
}
