import type { Executor } from '../../db/executor.ts';
import { newestFirstPage } from '../../db/newest-first-page.ts';
import type { ApiKeysTable } from '../../db/schema.ts';
import { BoundedCache } from '../../lib/bounded-cache.ts';
import { nowIso } from '../../lib/clock.ts';
import { randomBase62, safeEqual, sha256Hex } from '../../lib/crypto.ts';
import { AppError, notFound, validationError } from '../../lib/errors.ts';
import { isUuid, newId } from '../../lib/ids.ts';
import type { CursorCodec, Page } from '../../lib/pagination.ts';
import { deleteApiKey, findActiveKey, findActiveKeyByHash, insertApiKey, touchApiKeys } from './api-keys.repo.ts';
import { isScope, type Scope } from './scopes.ts';
import type { AuthContext } from '../../http/types.ts';

export const API_KEY_PREFIX = 'pyk_';
/** 44 base62 chars = 262 bits of randomness. */
const API_KEY_RANDOM_CHARS = 44;
const KEY_FORMAT = /^pyk_[0-9A-Za-z]{44,128}$/;

export interface ApiKeyView {
  id: string;
  name: string;
  scopes: string[];
  key_prefix: string;
  created_at: string;
  last_used_at: string | null;
}

export interface CreatedApiKey extends ApiKeyView {
  key: string;
}

function toView(row: ApiKeysTable): ApiKeyView {
  return {
    id: row.id,
    name: row.name,
    scopes: JSON.parse(row.scopes) as string[],
    key_prefix: row.key_prefix,
    created_at: row.created_at,
    last_used_at: row.last_used_at,
  };
}

export function validateKeyInput(input: { name: unknown; scopes: unknown }): { name: string; scopes: Scope[] } {
  const errors: { field: string; message: string }[] = [];
  const name = typeof input.name === 'string' ? input.name.trim() : '';
  if (name.length < 1 || name.length > 200) errors.push({ field: 'name', message: 'name must be 1-200 characters' });
  const scopes: Scope[] = [];
  if (!Array.isArray(input.scopes) || input.scopes.length === 0) {
    errors.push({ field: 'scopes', message: 'scopes must be a non-empty array' });
  } else {
    input.scopes.forEach((s, i) => {
      if (typeof s === 'string' && isScope(s)) {
        if (!scopes.includes(s)) scopes.push(s);
      } else errors.push({ field: `scopes[${i}]`, message: `unknown scope ${JSON.stringify(s)}` });
    });
  }
  if (errors.length) throw validationError(errors);
  return { name, scopes };
}

interface CacheEntry {
  auth: AuthContext | null;
  expiresAt: number;
}

/**
 * API keys: creation, listing, revocation and bearer-token authentication.
 * Only SHA-256 hashes are stored. Authentication caches lookups for at most `cacheSeconds`
 * (contract: <= 5 s) so a deleted key stops working on every node within that time, and
 * `last_used_at` is written in coalesced batches instead of once per request.
 */
export class ApiKeysService {
  private readonly cache = new BoundedCache<string, CacheEntry>(10_000);
  private readonly touched = new Set<string>();

  constructor(
    private readonly db: Executor,
    private readonly cursors: CursorCodec,
    private readonly cacheSeconds: number,
  ) {}

  async create(
    tenantId: string,
    input: { name: unknown; scopes: unknown },
    callerScopes: ReadonlySet<string> | 'all',
    db: Executor = this.db,
  ): Promise<CreatedApiKey> {
    const { name, scopes } = validateKeyInput(input);
    if (callerScopes !== 'all') {
      const missing = scopes.filter((s) => !callerScopes.has(s));
      if (missing.length) {
        throw new AppError(
          'insufficient_scope',
          `A key can only grant scopes it holds; missing: ${missing.join(', ')}`,
        );
      }
    }
    const key = API_KEY_PREFIX + randomBase62(API_KEY_RANDOM_CHARS);
    const row: ApiKeysTable = {
      tenant_id: tenantId,
      id: newId(),
      name,
      key_prefix: key.slice(0, 12),
      key_hash: sha256Hex(key),
      scopes: JSON.stringify(scopes),
      created_at: nowIso(),
      last_used_at: null,
      deleted_at: null,
    };
    await insertApiKey(db, row);
    return { ...toView(row), key };
  }

  async list(tenantId: string, limit: number, cursor?: string): Promise<Page<ApiKeyView>> {
    return newestFirstPage(this.db, 'api_keys', tenantId, { limit, cursor, cursors: this.cursors }, toView);
  }

  /**
   * Revokes a key. As for creating one, a caller may revoke only a key whose
   * scopes it holds: a key with only `manage:api-keys` cannot switch off a key that sends mail.
   * Unknown (or another tenant's) ids are 404 before the scopes are compared. A key's scopes
   * never change, so reading them before the delete leaves no gap to exploit.
   */
  async delete(tenantId: string, id: string, callerScopes: ReadonlySet<string> | 'all'): Promise<void> {
    if (callerScopes !== 'all') {
      const target = isUuid(id) ? await findActiveKey(this.db, tenantId, id) : undefined;
      if (!target) throw notFound('API key');
      const missing = (JSON.parse(target.scopes) as string[]).filter((s) => !callerScopes.has(s));
      if (missing.length) {
        throw new AppError(
          'insufficient_scope',
          `A key can only revoke keys whose scopes it holds; missing: ${missing.join(', ')}`,
        );
      }
    }
    const ok = await deleteApiKey(this.db, tenantId, id, nowIso());
    if (!ok) throw notFound('API key');
    // Drop this node's cache at once; other nodes follow within cacheSeconds.
    this.cache.clear();
  }

  /** Resolves a bearer token; null when missing, malformed, unknown or revoked. */
  async authenticate(rawKey: string): Promise<AuthContext | null> {
    if (!KEY_FORMAT.test(rawKey)) return null;
    const hash = sha256Hex(rawKey);
    const now = Date.now();
    const cached = this.cache.get(hash);
    let auth: AuthContext | null;
    if (cached && cached.expiresAt > now) {
      auth = cached.auth;
    } else {
      const row = await findActiveKeyByHash(this.db, hash);
      // The index lookup already matched the hash; compare again in constant time so no
      // code path depends on a short-circuiting string comparison of secret material.
      auth =
        row && safeEqual(row.key_hash, hash)
          ? { tenantId: row.tenant_id, keyId: row.id, scopes: new Set(JSON.parse(row.scopes) as string[]) }
          : null;
      if (this.cacheSeconds > 0) {
        this.cache.set(hash, { auth, expiresAt: now + this.cacheSeconds * 1000 });
      }
    }
    if (auth) this.touched.add(auth.keyId);
    return auth;
  }

  /** Writes the coalesced last_used_at stamps; called periodically and at shutdown. */
  async flushLastUsed(): Promise<void> {
    if (this.touched.size === 0) return;
    const ids = [...this.touched];
    this.touched.clear();
    await touchApiKeys(this.db, ids, nowIso());
  }
}
